// Package dbtest gives tests their own Postgres database and Redis key space on
// the local services (`make services`), so tests run in parallel, on real
// servers, without seeing each other's data.
//
// Each database is cloned from a template that already carries every
// migration, which costs a CREATE DATABASE instead of a full migration run.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard/switchyard/migrations"
)

const (
	// DatabaseURLEnv names the environment variable holding the URL of the
	// Postgres database the helpers connect to; test databases are created
	// next to it on the same server.
	DatabaseURLEnv = "SWITCHYARD_TEST_DATABASE_URL"
	// RedisURLEnv names the environment variable holding the test Redis URL.
	RedisURLEnv = "SWITCHYARD_TEST_REDIS_URL"

	defaultDatabaseURL = "postgres://postgres@127.0.0.1:55432/switchyard?sslmode=disable"
	defaultRedisURL    = "redis://127.0.0.1:56379/0"

	// templateLockKey serializes template creation across test processes
	// (`go test ./...` runs packages concurrently). It is a session advisory
	// lock on the base database.
	templateLockKey int64 = 0x73_77_79_64_74_6d_70_6c // "swydtmpl"

	// poolMaxConns is modest because every parallel test in every package
	// gets its own pool on one shared server.
	poolMaxConns = 20

	// setupTimeout bounds each helper's own work so a wedged server fails the
	// test instead of hanging it until the go test timeout.
	setupTimeout = 2 * time.Minute
)

// NewDatabase creates a fresh database for one test, cloned from a migrated
// template, and drops it at cleanup. Returns its URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), setupTimeout)
	defer cancel()

	base := baseURL(t)
	conn := connectBase(ctx, t, base)
	defer closeConn(conn)

	tmpl := templateName()
	if err := ensureTemplate(ctx, conn, base, tmpl); err != nil {
		t.Fatalf("dbtest: prepare template database %s: %v", tmpl, err)
	}
	return createDatabase(ctx, t, conn, base, tmpl)
}

// NewEmptyDatabase creates a fresh database with no schema at all and drops it
// at cleanup. Returns its URL. It is for tests of the migrations themselves;
// everything else wants NewDatabase.
func NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), setupTimeout)
	defer cancel()

	base := baseURL(t)
	conn := connectBase(ctx, t, base)
	defer closeConn(conn)
	return createDatabase(ctx, t, conn, base, "template0")
}

// NewPool returns a pgxpool.Pool on a fresh database (NewDatabase), closed at
// cleanup.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dbURL := NewDatabase(t)
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatalf("dbtest: parse pool config: %v", err)
	}
	cfg.MaxConns = poolMaxConns
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatalf("dbtest: open pool: %v", err)
	}
	// Registered after NewDatabase's cleanup, so it runs first: the pool is
	// closed before its database is dropped.
	t.Cleanup(pool.Close)
	return pool
}

// Redis returns a go-redis client on the test Redis, closed at cleanup.
func Redis(t testing.TB) *redis.Client {
	t.Helper()
	raw := os.Getenv(RedisURLEnv)
	if raw == "" {
		raw = defaultRedisURL
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		t.Fatalf("dbtest: parse %s %q: %v", RedisURLEnv, raw, err)
	}
	client := redis.NewClient(opts)
	t.Cleanup(func() { _ = client.Close() })

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		t.Fatalf("dbtest: cannot reach test Redis at %s: %v (start them with `make services`)", opts.Addr, err)
	}
	return client
}

// KeyPrefix returns a Redis key prefix unique to this test ("test:<random>:"),
// whose keys are deleted at cleanup.
func KeyPrefix(t testing.TB) string {
	t.Helper()
	client := Redis(t)
	prefix := "test:" + randomHex() + ":"
	// Registered after Redis's cleanup, so it runs while the client is open.
	t.Cleanup(func() {
		// t.Context() is already cancelled during cleanup.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		iter := client.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("dbtest: scan keys under %q for cleanup: %v", prefix, err)
			return
		}
		if len(keys) == 0 {
			return
		}
		if err := client.Unlink(ctx, keys...).Err(); err != nil {
			t.Errorf("dbtest: delete keys under %q: %v", prefix, err)
		}
	})
	return prefix
}

// baseURL returns the URL of the database the helpers connect to in order to
// create others. It must be a URL (not a key=value DSN) because test database
// URLs are made from it by swapping the database name.
func baseURL(t testing.TB) *url.URL {
	t.Helper()
	raw := os.Getenv(DatabaseURLEnv)
	if raw == "" {
		raw = defaultDatabaseURL
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("dbtest: %s must be a postgres:// URL, got %q", DatabaseURLEnv, raw)
	}
	return u
}

// connectBase connects to the base database, failing the test with a hint to
// start the services when it cannot.
func connectBase(ctx context.Context, t testing.TB, base *url.URL) *pgx.Conn {
	t.Helper()
	connCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(connCtx, base.String())
	if err != nil {
		t.Fatalf("dbtest: cannot reach test Postgres at %s: %v (start them with `make services`)", base.Redacted(), err)
	}
	return conn
}

// templateName names the template after a hash of the embedded migration
// files, so changing any migration builds a new template instead of reusing
// a stale one.
func templateName() string {
	h := sha256.New()
	// WalkDir visits in lexical order, so the hash is stable. Reading the
	// embedded files cannot fail.
	_ = fs.WalkDir(migrations.FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(migrations.FS(), path)
		if err != nil {
			return err
		}
		// Length prefixes keep name/body boundaries unambiguous.
		for _, part := range [][]byte{[]byte(path), body} {
			_ = binary.Write(h, binary.BigEndian, uint64(len(part)))
			h.Write(part)
		}
		return nil
	})
	return "switchyard_tmpl_" + hex.EncodeToString(h.Sum(nil))[:12]
}

// ensureTemplate makes sure the migrated template database exists. The
// template is marked IS_TEMPLATE only once fully migrated, so that flag is the
// completion marker: a database by that name without it is debris from a run
// that died mid-build, and is rebuilt.
func ensureTemplate(ctx context.Context, conn *pgx.Conn, base *url.URL, tmpl string) error {
	// Fast path, without the lock: every test after the first lands here.
	if ready, err := templateReady(ctx, conn, tmpl); err != nil || ready {
		return err
	}

	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLockKey); err != nil {
		return fmt.Errorf("wait for template lock: %w", err)
	}
	defer func() {
		// Unlock even if the test's context is done; otherwise the closing
		// session releases it anyway.
		unlockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = conn.Exec(unlockCtx, "SELECT pg_advisory_unlock($1)", templateLockKey)
	}()

	// Another process may have built it while we waited.
	if ready, err := templateReady(ctx, conn, tmpl); err != nil || ready {
		return err
	}

	ident := pgx.Identifier{tmpl}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop unfinished template: %w", err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident+" TEMPLATE template0"); err != nil {
		return fmt.Errorf("create: %w", err)
	}

	m, err := migrations.New(withDatabase(base, tmpl))
	if err != nil {
		return fmt.Errorf("open migrator: %w", err)
	}
	defer m.Close()
	if err := m.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}

	// ALLOW_CONNECTIONS false keeps anyone from lingering in the template,
	// which would make every CREATE DATABASE ... TEMPLATE fail. IS_TEMPLATE
	// goes last: it marks the template complete.
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident+" WITH ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("forbid connections: %w", err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident+" WITH IS_TEMPLATE true"); err != nil {
		return fmt.Errorf("mark as template: %w", err)
	}
	return nil
}

// templateReady reports whether tmpl exists and was completed.
func templateReady(ctx context.Context, conn *pgx.Conn, tmpl string) (bool, error) {
	var ready bool
	err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1 AND datistemplate)", tmpl).Scan(&ready)
	if err != nil {
		return false, fmt.Errorf("look up template: %w", err)
	}
	return ready, nil
}

// createDatabase clones tmpl into a new database, registers its drop, and
// returns its URL.
func createDatabase(ctx context.Context, t testing.TB, conn *pgx.Conn, base *url.URL, tmpl string) string {
	t.Helper()
	name := "switchyard_test_" + randomHex()
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident+" TEMPLATE "+pgx.Identifier{tmpl}.Sanitize()); err != nil {
		t.Fatalf("dbtest: create database %s from %s: %v", name, tmpl, err)
	}
	t.Cleanup(func() {
		// t.Context() is already cancelled during cleanup. FORCE ends
		// connections the test left open (a pool not yet closed, a River
		// client still stopping) rather than failing on them.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base.String())
		if err != nil {
			t.Errorf("dbtest: connect to drop database %s: %v", name, err)
			return
		}
		defer closeConn(conn)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			t.Errorf("dbtest: drop database %s: %v", name, err)
		}
	})
	return withDatabase(base, name)
}

// withDatabase returns base with its database name replaced by name.
func withDatabase(base *url.URL, name string) string {
	u := *base
	u.Path = "/" + name
	u.RawPath = ""
	return u.String()
}

// randomHex returns 16 random hex digits: enough that names never collide
// across concurrent test processes.
func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails: it crashes the program instead
	return hex.EncodeToString(b[:])
}

// closeConn closes conn with a fresh deadline, since the caller's context may
// be done by now.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}
