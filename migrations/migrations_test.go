package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4/source"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/switchyard/switchyard/dbtest"
	"github.com/switchyard/switchyard/migrations"
)

// newMigrator returns a Migrator on a fresh, empty database, and a connection
// to that database for inspecting it.
func newMigrator(t *testing.T) (*migrations.Migrator, *pgx.Conn) {
	t.Helper()
	dbURL := dbtest.NewEmptyDatabase(t)
	m, err := migrations.New(dbURL)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = m.Close() })
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	// Closed before dbtest drops the database (cleanups run last-in first-out).
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return m, conn
}

func up(t *testing.T, m *migrations.Migrator) {
	t.Helper()
	if err := m.Up(t.Context()); err != nil {
		t.Fatalf("Up: %v", err)
	}
}

func assertVersion(t *testing.T, m *migrations.Migrator, want uint) {
	t.Helper()
	got, dirty, err := m.Version(t.Context())
	if err != nil {
		t.Fatalf("Version: %v", err)
	}
	if got != want || dirty {
		t.Fatalf("Version = %d, dirty %v; want %d, clean", got, dirty, want)
	}
}

// relationExists reports whether name resolves through the search path.
func relationExists(t *testing.T, conn *pgx.Conn, name string) bool {
	t.Helper()
	var exists bool
	if err := conn.QueryRow(t.Context(), "SELECT to_regclass($1) IS NOT NULL", name).Scan(&exists); err != nil {
		t.Fatalf("look up %s: %v", name, err)
	}
	return exists
}

// schemaObjects lists the tables, indexes, functions and triggers of the
// public schema, one per line.
func schemaObjects(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var list string
	err := conn.QueryRow(t.Context(), `
		SELECT string_agg(kind || ' ' || name, E'\n' ORDER BY kind, name) FROM (
			SELECT 'relation' AS kind, relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = 'public' AND c.relkind IN ('r', 'i')
			UNION ALL
			SELECT 'function', proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'
			UNION ALL
			SELECT 'trigger', tgname FROM pg_trigger WHERE NOT tgisinternal
		) o`).Scan(&list)
	if err != nil {
		t.Fatalf("list schema objects: %v", err)
	}
	return list
}

func TestEmbeddedFiles(t *testing.T) {
	t.Parallel()
	entries, err := fs.ReadDir(migrations.FS(), ".")
	if err != nil {
		t.Fatal(err)
	}
	// golang-migrate silently skips names it cannot parse; catch them here.
	dirs := map[uint][]string{}
	for _, e := range entries {
		m, err := source.DefaultParse(e.Name())
		if err != nil {
			t.Errorf("%s: not a golang-migrate file name: %v", e.Name(), err)
			continue
		}
		dirs[m.Version] = append(dirs[m.Version], string(m.Direction))
		body, err := fs.ReadFile(migrations.FS(), e.Name())
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(body), "TEMPLATE") {
			t.Errorf("%s: River schema template marker left in", e.Name())
		}
		if !strings.HasPrefix(string(body), "-- ") {
			t.Errorf("%s: should start with a comment saying where it came from", e.Name())
		}
	}
	if got := migrations.Latest(); got != uint(len(dirs)) || got < 9 {
		t.Errorf("Latest() = %d with %d versions embedded; want them numbered 1..n without gaps", got, len(dirs))
	}
	for v := uint(1); v <= migrations.Latest(); v++ {
		if len(dirs[v]) != 2 {
			t.Errorf("version %d has %v, want up and down", v, dirs[v])
		}
	}
}

func TestNewAcceptsURLSchemes(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"postgres://postgres@127.0.0.1:55432/x?sslmode=disable",
		"postgresql://postgres@127.0.0.1:55432/x?sslmode=disable",
		"pgx5://postgres@127.0.0.1:55432/x?sslmode=disable",
	} {
		m, err := migrations.New(u)
		if err != nil {
			t.Errorf("New(%q): %v", u, err)
			continue
		}
		_ = m.Close()
	}
	if _, err := migrations.New("postgres://[::1"); err == nil {
		t.Error("New accepted a malformed URL")
	}
}

func TestUpFromScratch(t *testing.T) {
	t.Parallel()
	m, conn := newMigrator(t)
	assertVersion(t, m, 0)

	start := time.Now()
	up(t, m)
	t.Logf("full migration up took %v", time.Since(start))

	assertVersion(t, m, migrations.Latest())
	for _, table := range []string{"river_job", "river_queue", "river_leader", "river_migration", "switchyard_idempotency_key"} {
		if !relationExists(t, conn, table) {
			t.Errorf("table %s missing after up", table)
		}
	}
	var hasPending bool
	err := conn.QueryRow(t.Context(),
		"SELECT 'pending' = ANY (enum_range(NULL::river_job_state)::text[])").Scan(&hasPending)
	if err != nil {
		t.Fatalf("read river_job_state: %v", err)
	}
	if !hasPending {
		t.Error("river_job_state lacks 'pending' (added by River 004)")
	}
}

// TestRiverUsesSchema checks the schema is the one River v0.51.1 expects by
// letting River insert, including a unique job (which uses 006's function).
func TestRiverUsesSchema(t *testing.T) {
	t.Parallel()
	m, conn := newMigrator(t)
	up(t, m)

	// Insert-only: no pool needed, River uses the transaction it is given.
	client, err := river.NewClient(riverpgxv5.New(nil), &river.Config{})
	if err != nil {
		t.Fatalf("river.NewClient: %v", err)
	}
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	opts := &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}
	first, err := client.InsertTx(t.Context(), tx, probeArgs{N: 1}, opts)
	if err != nil {
		t.Fatalf("InsertTx: %v", err)
	}
	dup, err := client.InsertTx(t.Context(), tx, probeArgs{N: 1}, opts)
	if err != nil {
		t.Fatalf("InsertTx duplicate: %v", err)
	}
	if !dup.UniqueSkippedAsDuplicate || dup.Job.ID != first.Job.ID {
		t.Errorf("duplicate unique insert not detected: skipped %v, IDs %d and %d", dup.UniqueSkippedAsDuplicate, first.Job.ID, dup.Job.ID)
	}
}

type probeArgs struct {
	N int `json:"n"`
}

func (probeArgs) Kind() string { return "migrations_probe" }

func TestIdempotencyKeyCascades(t *testing.T) {
	t.Parallel()
	m, conn := newMigrator(t)
	up(t, m)

	var jobID int64
	err := conn.QueryRow(t.Context(),
		"INSERT INTO river_job (kind, max_attempts, args) VALUES ('probe', 1, '{}') RETURNING id").Scan(&jobID)
	if err != nil {
		t.Fatalf("insert job: %v", err)
	}
	if _, err := conn.Exec(t.Context(), "INSERT INTO switchyard_idempotency_key (key, task_id) VALUES ('k', $1)", jobID); err != nil {
		t.Fatalf("insert key: %v", err)
	}
	if _, err := conn.Exec(t.Context(), "DELETE FROM river_job WHERE id = $1", jobID); err != nil {
		t.Fatalf("delete job: %v", err)
	}
	var left int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM switchyard_idempotency_key").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d idempotency keys outlived their task", left)
	}
}

func TestUpTwiceIsNoop(t *testing.T) {
	t.Parallel()
	m, _ := newMigrator(t)
	up(t, m)
	up(t, m)
	assertVersion(t, m, migrations.Latest())
}

func TestDownOneThenUp(t *testing.T) {
	t.Parallel()
	m, conn := newMigrator(t)
	up(t, m)

	full := schemaObjects(t, conn)
	if err := m.Down(t.Context(), 1); err != nil {
		t.Fatalf("Down(1): %v", err)
	}
	assertVersion(t, m, migrations.Latest()-1)
	if !relationExists(t, conn, "river_job") {
		t.Error("river_job dropped by rolling back one version")
	}
	down := schemaObjects(t, conn)
	if down == full {
		t.Error("rolling back the newest migration changed no table, index, function or trigger")
	}

	up(t, m)
	assertVersion(t, m, migrations.Latest())
	if again := schemaObjects(t, conn); again != full {
		t.Errorf("schema after down and up differs:\n%s\nwant\n%s", again, full)
	}
}

func TestDownAll(t *testing.T) {
	t.Parallel()
	m, conn := newMigrator(t)
	up(t, m)

	if err := m.Down(t.Context(), int(migrations.Latest())); err != nil {
		t.Fatalf("Down(all): %v", err)
	}
	assertVersion(t, m, 0)
	var left []string
	rows, err := conn.Query(t.Context(), `
		SELECT relname FROM pg_class JOIN pg_namespace n ON n.oid = relnamespace
		WHERE nspname = current_schema() AND (relname LIKE 'river%' OR relname LIKE 'switchyard%')
		UNION ALL
		SELECT typname FROM pg_type JOIN pg_namespace n ON n.oid = typnamespace
		WHERE nspname = current_schema() AND typname LIKE 'river%'`)
	if err != nil {
		t.Fatal(err)
	}
	left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("left behind after rolling everything back: %v", left)
	}

	// And the empty schema migrates up again.
	up(t, m)
	assertVersion(t, m, migrations.Latest())
}

func TestDownRejectsBadCounts(t *testing.T) {
	t.Parallel()
	m, _ := newMigrator(t)
	up(t, m)

	for _, n := range []int{0, -1, int(migrations.Latest()) + 1} {
		if err := m.Down(t.Context(), n); err == nil {
			t.Errorf("Down(%d) succeeded", n)
		} else {
			t.Logf("Down(%d): %v", n, err)
		}
	}
	assertVersion(t, m, migrations.Latest())
}

func TestDatabaseAhead(t *testing.T) {
	t.Parallel()
	m, conn := newMigrator(t)
	up(t, m)
	ahead := migrations.Latest() + 1
	if _, err := conn.Exec(t.Context(), "UPDATE schema_migrations SET version = $1", ahead); err != nil {
		t.Fatal(err)
	}

	err := m.Up(t.Context())
	if !errors.Is(err, migrations.ErrDatabaseAhead) {
		t.Fatalf("Up on a database ahead of the binary: %v, want ErrDatabaseAhead", err)
	}
	want := fmt.Sprintf("database schema is at version %d but this switchyard binary only knows up to %d: upgrade switchyard", ahead, migrations.Latest())
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if err := m.Down(t.Context(), 1); !errors.Is(err, migrations.ErrDatabaseAhead) {
		t.Errorf("Down on a database ahead of the binary: %v, want ErrDatabaseAhead", err)
	}

	got, dirty, err := m.Version(t.Context())
	if err != nil || got != ahead || dirty {
		t.Errorf("Version = %d, %v, %v; want %d, clean: refusing must change nothing", got, dirty, err, ahead)
	}
	if !relationExists(t, conn, "switchyard_idempotency_key") {
		t.Error("schema changed by a refused migration")
	}
}

func TestDirty(t *testing.T) {
	t.Parallel()
	m, conn := newMigrator(t)
	up(t, m)
	if _, err := conn.Exec(t.Context(), "UPDATE schema_migrations SET dirty = true"); err != nil {
		t.Fatal(err)
	}

	got, dirty, err := m.Version(t.Context())
	if err != nil || got != migrations.Latest() || !dirty {
		t.Errorf("Version = %d, %v, %v; want %d, dirty", got, dirty, err, migrations.Latest())
	}
	err = m.Up(t.Context())
	if !errors.Is(err, migrations.ErrDirty) {
		t.Fatalf("Up on a dirty database: %v, want ErrDirty", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprint(migrations.Latest())) || !strings.Contains(err.Error(), "force") {
		t.Errorf("error %q should name the version and how to recover", err)
	}
	if err := m.Down(t.Context(), 1); !errors.Is(err, migrations.ErrDirty) {
		t.Errorf("Down on a dirty database: %v, want ErrDirty", err)
	}
}

// TestConcurrentUp is several pods starting at once: they must take turns,
// and all succeed.
func TestConcurrentUp(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewEmptyDatabase(t)
	const pods = 5
	errs := make([]error, pods)
	var wg sync.WaitGroup
	for i := range pods {
		wg.Go(func() {
			m, err := migrations.New(dbURL)
			if err != nil {
				errs[i] = err
				return
			}
			defer m.Close()
			errs[i] = m.Up(t.Context())
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("pod %d: %v", i, err)
		}
	}
	m, err := migrations.New(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	assertVersion(t, m, migrations.Latest())
}

func TestCancelledContext(t *testing.T) {
	t.Parallel()
	m, conn := newMigrator(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := m.Up(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Up with a cancelled context: %v, want context.Canceled", err)
	}
	if relationExists(t, conn, "river_job") {
		t.Error("Up with a cancelled context changed the schema")
	}
}

// TestLockWaitHonoursContext is a pod whose deadline passes while another
// process migrates: it gives up promptly and touches nothing.
func TestLockWaitHonoursContext(t *testing.T) {
	t.Parallel()
	m, conn := newMigrator(t)
	if _, err := conn.Exec(t.Context(), "SELECT pg_advisory_lock($1)", migrations.LockKey); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := m.Up(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Up while another holds the lock: %v, want context.DeadlineExceeded", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("Up took %v to notice its deadline", waited)
	}
	if relationExists(t, conn, "river_job") {
		t.Error("Up changed the schema without the lock")
	}

	if _, err := conn.Exec(t.Context(), "SELECT pg_advisory_unlock($1)", migrations.LockKey); err != nil {
		t.Fatal(err)
	}
	up(t, m)
}

// TestCancelStopsBetweenMigrations cancels Up while a migration is blocked:
// the migration in progress completes (interrupting it would leave the schema
// dirty) and the ones after it do not run.
func TestCancelStopsBetweenMigrations(t *testing.T) {
	t.Parallel()
	m, conn := newMigrator(t)
	up(t, m)
	if err := m.Down(t.Context(), int(migrations.Latest())-6); err != nil { // to 6: next up is River 007, which alters river_job
		t.Fatalf("Down to 6: %v", err)
	}

	// The blocker gets its own session: pg_stat_activity is a snapshot fixed
	// for the rest of a transaction, so polling inside it would never change.
	blockConn, err := pgx.ConnectConfig(t.Context(), conn.Config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = blockConn.Close(context.Background()) })
	blocker, err := blockConn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := blocker.Exec(t.Context(), "LOCK TABLE river_job IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- m.Up(ctx) }()

	// Wait until the migration is stuck behind our lock.
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for waiting := false; !waiting; {
		select {
		case <-deadline:
			t.Fatal("migration never blocked on river_job")
		case err := <-done:
			t.Fatalf("Up returned before blocking: %v", err)
		case <-tick.C:
		}
		err := conn.QueryRow(t.Context(), `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = 'switchyard-migrate' AND wait_event_type = 'Lock')`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	if err := blocker.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}

	err = <-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Up cancelled mid-way: %v, want context.Canceled", err)
	}
	t.Logf("Up cancelled mid-way: %v", err)
	assertVersion(t, m, 7)
}

func TestClosed(t *testing.T) {
	t.Parallel()
	m, _ := newMigrator(t)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Up(t.Context()); err == nil {
		t.Error("Up on a closed Migrator succeeded")
	}
}
