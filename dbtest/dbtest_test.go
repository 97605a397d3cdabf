package dbtest_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/dbtest"
	"github.com/switchyard/switchyard/migrations"
)

// assertMigrated fails unless pool's database carries the full schema.
func assertMigrated(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var version int64
	var dirty bool
	if err := pool.QueryRow(t.Context(), "SELECT version, dirty FROM schema_migrations").Scan(&version, &dirty); err != nil {
		t.Fatalf("read schema version: %v", err)
	}
	if version != int64(migrations.Latest()) || dirty {
		t.Errorf("schema at version %d (dirty %v), want %d", version, dirty, migrations.Latest())
	}
	for _, table := range []string{"river_job", "river_queue", "switchyard_idempotency_key"} {
		var exists bool
		if err := pool.QueryRow(t.Context(), "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists); err != nil {
			t.Fatal(err)
		}
		if !exists {
			t.Errorf("table %s missing", table)
		}
	}
}

func TestNewPoolIsolated(t *testing.T) {
	t.Parallel()
	start := time.Now()
	a := dbtest.NewPool(t)
	t.Logf("NewPool took %v", time.Since(start))
	b := dbtest.NewPool(t)
	assertMigrated(t, a)
	assertMigrated(t, b)

	var nameA, nameB string
	if err := a.QueryRow(t.Context(), "SELECT current_database()").Scan(&nameA); err != nil {
		t.Fatal(err)
	}
	if err := b.QueryRow(t.Context(), "SELECT current_database()").Scan(&nameB); err != nil {
		t.Fatal(err)
	}
	if nameA == nameB || !strings.HasPrefix(nameA, "switchyard_test_") {
		t.Errorf("databases %q and %q: want two distinct switchyard_test_ databases", nameA, nameB)
	}

	if _, err := a.Exec(t.Context(), "INSERT INTO river_queue (name) VALUES ('only_in_a')"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(t.Context(), "SELECT count(*) FROM river_queue").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("a row inserted through one pool is visible through the other")
	}
}

// TestNewDatabaseCleanup checks a test's database is gone once the test is.
func TestNewDatabaseCleanup(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("user", func(t *testing.T) {
		pool := dbtest.NewPool(t)
		if err := pool.QueryRow(t.Context(), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
	})
	pool := dbtest.NewPool(t)
	var exists bool
	if err := pool.QueryRow(t.Context(), "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Errorf("database %s outlived its test", name)
	}
}

// TestNewDatabaseParallelLoad clones many databases from the template at
// once, as a full `go test -p N ./...` with parallel tests does. Goroutines
// rather than parallel subtests, since -parallel defaults to GOMAXPROCS and
// would not overlap twenty creates on a small machine.
func TestNewDatabaseParallelLoad(t *testing.T) {
	t.Parallel()
	const n = 20
	urls := make([]string, n)
	durations := make([]time.Duration, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			began := time.Now()
			// NewDatabase only calls t.Fatalf on failure; from this goroutine
			// that ends the goroutine and fails the test, which is all we need.
			urls[i] = dbtest.NewDatabase(t)
			durations[i] = time.Since(began)
		})
	}
	close(start)
	wg.Wait()

	var total, longest time.Duration
	for i, u := range urls {
		if u == "" {
			t.Fatalf("database %d not created", i)
		}
		total += durations[i]
		longest = max(longest, durations[i])
		pool, err := pgxpool.New(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		assertMigrated(t, pool)
		pool.Close()
	}
	t.Logf("%d concurrent NewDatabase: mean %v, slowest %v", n, total/n, longest)
}

func TestNewEmptyDatabase(t *testing.T) {
	t.Parallel()
	m, err := migrations.New(dbtest.NewEmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	version, _, err := m.Version(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if version != 0 {
		t.Errorf("empty database at version %d", version)
	}
}

func TestKeyPrefix(t *testing.T) {
	t.Parallel()
	client := dbtest.Redis(t)
	a, b := dbtest.KeyPrefix(t), dbtest.KeyPrefix(t)
	if a == b {
		t.Errorf("KeyPrefix returned %q twice", a)
	}
	for _, p := range []string{a, b} {
		if !strings.HasPrefix(p, "test:") || !strings.HasSuffix(p, ":") {
			t.Errorf("prefix %q, want test:<random>:", p)
		}
	}

	var prefix string
	t.Run("user", func(t *testing.T) {
		prefix = dbtest.KeyPrefix(t)
		c := dbtest.Redis(t)
		for i := range 3 {
			if err := c.Set(t.Context(), fmt.Sprintf("%sk%d", prefix, i), "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
	keys, err := client.Keys(t.Context(), prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("keys outlived their test: %v", keys)
	}
}
