// Package migrations owns switchyard's database schema: River's own tables
// (one golang-migrate version per River migration, copied verbatim) followed by
// switchyard's tables. The SQL files are embedded, so a binary always carries
// exactly the schema it was built against.
package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/golang-migrate/migrate/v4"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

//go:embed *.sql
var files embed.FS

// ErrDatabaseAhead reports a database migrated by a newer switchyard than the
// running binary. Migrating it either way would be guesswork, so the binary
// refuses and asks to be upgraded.
var ErrDatabaseAhead = errors.New("database schema is ahead of this binary")

// ErrDirty reports a database whose last migration failed part-way. Only a
// human can tell what state the schema is in, so nothing runs until the
// version is forced clean.
var ErrDirty = errors.New("database schema is dirty")

// lockTimeout bounds how long Up and Down wait for another process that is
// migrating the same database. It is generous because the holder may be
// building an index on a large river_job; a pod that gives up restarts and
// tries again.
const lockTimeout = 5 * time.Minute

// lockKey is the session advisory lock that serializes switchyard migrators
// on one database. golang-migrate takes its own advisory lock too, but waits
// for it without a context and keeps waiting (and later holds it) after its
// timeout fires, so we queue on a lock we can cancel first.
const lockKey int64 = 0x73_77_79_64_6d_69_67_72 // "swydmigr"

// versionTable is golang-migrate's bookkeeping table (its default name).
const versionTable = "schema_migrations"

// FS returns the embedded migration files, for callers that need to fingerprint
// the schema (dbtest names its template database after their hash).
func FS() fs.FS {
	return files
}

// Latest returns the highest migration version embedded in this binary.
func Latest() uint {
	vs := versions()
	if len(vs) == 0 {
		return 0
	}
	return vs[len(vs)-1]
}

// versions returns the embedded migration versions in ascending order. It
// parses names the way golang-migrate's iofs source does (and skips what it
// skips), so it agrees with what Up will run.
func versions() []uint {
	// Reading the root of an embed.FS cannot fail.
	entries, _ := fs.ReadDir(files, ".")
	var vs []uint
	for _, e := range entries {
		m, err := source.DefaultParse(e.Name())
		if err != nil {
			continue
		}
		if !slices.Contains(vs, m.Version) {
			vs = append(vs, m.Version)
		}
	}
	slices.Sort(vs)
	return vs
}

// Migrator applies the embedded migrations to one database. It holds no
// connection between calls (each call connects, locks, works and disconnects),
// so one Migrator can be shared and used concurrently; concurrent calls, here
// or in other processes, run one after another.
type Migrator struct {
	connConfig *pgx.ConnConfig
	closed     atomic.Bool
}

// New returns a Migrator for databaseURL, which may use the postgres://,
// postgresql:// or pgx5:// scheme. It only parses the URL: nothing connects
// until a method is called.
func New(databaseURL string) (*Migrator, error) {
	// pgx5:// is golang-migrate's name for this driver; we hand golang-migrate
	// an open connection instead, so only pgx needs to understand the URL.
	if rest, ok := strings.CutPrefix(databaseURL, "pgx5://"); ok {
		databaseURL = "postgres://" + rest
	}
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		// Lets an operator see in pg_stat_activity who holds the lock.
		cfg.RuntimeParams["application_name"] = "switchyard-migrate"
	}
	return &Migrator{connConfig: cfg}, nil
}

// Close releases the Migrator; calls made afterwards fail. It never blocks,
// since no connection outlives a call.
func (m *Migrator) Close() error {
	m.closed.Store(true)
	return nil
}

// Version returns the database's schema version and whether its last migration
// failed part-way. A database nothing was applied to is at version 0.
func (m *Migrator) Version(ctx context.Context) (version uint, dirty bool, err error) {
	if m.closed.Load() {
		return 0, false, errors.New("read schema version: migrator is closed")
	}
	conn, err := pgx.ConnectConfig(ctx, m.connConfig)
	if err != nil {
		return 0, false, fmt.Errorf("read schema version: connect: %w", err)
	}
	defer closeConn(conn)
	version, dirty, err = readVersion(ctx, conn)
	if err != nil {
		return 0, false, fmt.Errorf("read schema version: %w", err)
	}
	return version, dirty, nil
}

// Up applies every embedded migration the database lacks. A database that is
// already current is not an error. If ctx ends, Up stops after the migration
// in progress (interrupting one would leave the schema dirty) and returns the
// context's error.
func (m *Migrator) Up(ctx context.Context) error {
	plan := func(cur uint) (int, error) {
		return len(slices.DeleteFunc(versions(), func(v uint) bool { return v <= cur })), nil
	}
	if err := m.run(ctx, plan); err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	return nil
}

// Down rolls back the n most recent migrations (n >= 1; n equal to the current
// version empties the schema). Like Up, it stops between migrations when ctx
// ends.
func (m *Migrator) Down(ctx context.Context, n int) error {
	if n < 1 {
		return fmt.Errorf("migrate down: cannot roll back %d versions: n must be at least 1", n)
	}
	plan := func(cur uint) (int, error) {
		applied := len(slices.DeleteFunc(versions(), func(v uint) bool { return v > cur }))
		if n > applied {
			return 0, fmt.Errorf("cannot roll back %d versions: database is at version %d, which has %d applied", n, cur, applied)
		}
		return -n, nil
	}
	if err := m.run(ctx, plan); err != nil {
		return fmt.Errorf("migrate down: %w", err)
	}
	return nil
}

// run serializes with other migrators, refuses databases it cannot safely
// touch, then has golang-migrate apply migrations one at a time. plan
// validates the request against the current version and returns how many
// migrations to apply: positive up, negative down.
func (m *Migrator) run(ctx context.Context, plan func(cur uint) (steps int, err error)) error {
	if m.closed.Load() {
		return errors.New("migrator is closed")
	}

	conn, err := pgx.ConnectConfig(ctx, m.connConfig)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	// Closing the session releases the advisory lock, including on the error
	// paths below.
	defer closeConn(conn)

	lockCtx, cancel := context.WithTimeoutCause(ctx, lockTimeout,
		fmt.Errorf("another process has been migrating this database for over %v", lockTimeout))
	_, err = conn.Exec(lockCtx, "SELECT pg_advisory_lock($1)", lockKey)
	cancel()
	if err != nil {
		if cause := context.Cause(lockCtx); cause != nil {
			err = cause
		}
		return fmt.Errorf("wait for migration lock: %w", err)
	}

	// Checked under the lock, so no other migrator can change the answer.
	cur, dirty, err := readVersion(ctx, conn)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if latest := Latest(); cur > latest {
		return fmt.Errorf("%w: database schema is at version %d but this switchyard binary only knows up to %d: upgrade switchyard",
			ErrDatabaseAhead, cur, latest)
	}
	if dirty {
		return fmt.Errorf("%w: migration to version %d failed part-way: repair the schema by hand, then record the version it now matches "+
			"with `migrate -path migrations -database <url> force <version>` or `UPDATE %s SET version = <version>, dirty = false`",
			ErrDirty, cur, versionTable)
	}
	steps, err := plan(cur)
	if err != nil {
		return err
	}
	if steps == 0 {
		return nil
	}

	mig, err := m.newMigrate()
	if err != nil {
		return err
	}
	// golang-migrate's lock is uncontended among switchyard processes (they
	// hold lockKey first); the timeout only matters against other tools, e.g.
	// the migrate CLI.
	mig.LockTimeout = lockTimeout

	dir, total := 1, steps
	if steps < 0 {
		dir, total = -1, -steps
	}
	var workErr error
	for done := 0; done < total && workErr == nil; done++ {
		// golang-migrate runs statements without a context, and cancelling
		// one would leave the schema dirty anyway, so ctx is honoured
		// between migrations. (Its GracefulStop channel would do the same,
		// but races with its own reader goroutine.)
		if ctx.Err() != nil {
			now, _, err := readVersion(context.WithoutCancel(ctx), conn)
			if err != nil {
				workErr = fmt.Errorf("stopped after %d of %d migrations: %w", done, total, context.Cause(ctx))
			} else {
				workErr = fmt.Errorf("stopped at version %d after %d of %d migrations: %w", now, done, total, context.Cause(ctx))
			}
			break
		}
		workErr = mig.Steps(dir)
	}

	if errors.Is(workErr, migrate.ErrLockTimeout) {
		// golang-migrate's lock attempt is still blocked on the driver's
		// connection, and closing waits for it; finish in the background.
		go func() { _ = closeMigrate(mig) }()
	} else if closeErr := closeMigrate(mig); closeErr != nil && workErr == nil {
		workErr = closeErr
	}
	return workErr
}

// newMigrate builds a golang-migrate instance on a connection pool of our own,
// so a failed setup closes everything it opened.
func (m *Migrator) newMigrate() (*migrate.Migrate, error) {
	src, err := iofs.New(files, ".")
	if err != nil {
		return nil, fmt.Errorf("open embedded migrations: %w", err)
	}
	sqlDB := stdlib.OpenDB(*m.connConfig)
	drv, err := pgxmigrate.WithInstance(sqlDB, &pgxmigrate.Config{MigrationsTable: versionTable})
	if err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("prepare migration driver: %w", err)
	}
	mig, err := migrate.NewWithInstance("iofs", src, "pgx5", drv)
	if err != nil {
		_ = drv.Close()
		return nil, fmt.Errorf("prepare migrations: %w", err)
	}
	return mig, nil
}

// closeMigrate closes golang-migrate's source and database.
func closeMigrate(mig *migrate.Migrate) error {
	srcErr, dbErr := mig.Close()
	if err := errors.Join(srcErr, dbErr); err != nil {
		return fmt.Errorf("close migration driver: %w", err)
	}
	return nil
}

// readVersion reads golang-migrate's bookkeeping directly, so the read honours
// ctx and never creates the table (golang-migrate's driver creates it on open).
func readVersion(ctx context.Context, conn *pgx.Conn) (uint, bool, error) {
	var version int64
	var dirty bool
	err := conn.QueryRow(ctx, "SELECT version, dirty FROM "+versionTable+" LIMIT 1").Scan(&version, &dirty)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table: never migrated
		return 0, false, nil
	case err != nil:
		return 0, false, err
	case version < 0:
		// golang-migrate records a failed rollback of the first migration
		// as version -1, dirty.
		return 0, dirty, nil
	}
	return uint(version), dirty, nil
}

// closeConn ends the session even when the caller's context is done, since
// the session may hold the migration lock.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}
