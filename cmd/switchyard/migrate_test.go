package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/dbtest"
	"github.com/switchyard/switchyard/migrations"
)

// versionLine is what migrate prints for a database at version v.
func versionLine(v uint) string {
	return fmt.Sprintf("schema version %d; this binary's latest is %d\n", v, migrations.Latest())
}

func TestMigrateLifecycle(t *testing.T) {
	t.Parallel()
	latest := migrations.Latest()
	if latest < 2 {
		t.Fatalf("migrations.Latest() = %d; this test needs at least 2 migrations", latest)
	}
	env := testEnv(t, dbtest.NewEmptyDatabase(t))

	if got := mustRun(t, env, "migrate", "version"); got != versionLine(0) {
		t.Fatalf("migrate version on an empty database printed %q, want %q", got, versionLine(0))
	}

	first := mustRun(t, env, "migrate", "up")
	if first != versionLine(latest) {
		t.Fatalf("migrate up printed %q, want %q", first, versionLine(latest))
	}
	// Up on a current database is a no-op, not an error.
	if second := mustRun(t, env, "migrate", "up"); second != first {
		t.Fatalf("second migrate up printed %q, want the same as the first, %q", second, first)
	}

	if got := mustRun(t, env, "migrate", "down", "1"); got != versionLine(latest-1) {
		t.Fatalf("migrate down 1 printed %q, want %q", got, versionLine(latest-1))
	}
	if got := mustRun(t, env, "migrate", "version"); got != versionLine(latest-1) {
		t.Fatalf("migrate version after down 1 printed %q, want %q", got, versionLine(latest-1))
	}
	// down without N rolls back one.
	if got := mustRun(t, env, "migrate", "down"); got != versionLine(latest-2) {
		t.Fatalf("migrate down printed %q, want %q", got, versionLine(latest-2))
	}
	if got := mustRun(t, env, "migrate", "up"); got != versionLine(latest) {
		t.Fatalf("migrate up after down printed %q, want %q", got, versionLine(latest))
	}
}

func TestMigrateArgumentErrors(t *testing.T) {
	t.Parallel()
	latest := migrations.Latest()
	env := testEnv(t, dbtest.NewDatabase(t))

	for _, c := range []struct {
		args []string
		want []string // substrings of the error
	}{
		{[]string{"migrate", "down", "abc"}, []string{`"abc"`, "positive integer"}},
		{[]string{"migrate", "down", "0"}, []string{`"0"`, "positive integer"}},
		{[]string{"migrate", "down", "-1"}, []string{"-1"}},
		{[]string{"migrate", "down", "1", "2"}, []string{"at most one argument"}},
		{[]string{"migrate", "up", "2"}, []string{"no arguments"}},
		{[]string{"migrate", "frob"}, []string{"unknown subcommand", `"frob"`}},
		{[]string{"migrate"}, []string{"missing subcommand"}},
		// More than the database has applied: refused, nothing rolled back.
		{[]string{"migrate", "down", fmt.Sprint(latest + 1)}, []string{"cannot roll back"}},
	} {
		name := strings.Join(c.args, " ")
		msg := runErr(t, env, c.args...)
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("switchyard %s: error %q does not mention %q", name, msg, w)
			}
		}
		// A refused command leaves the schema alone.
		if got := mustRun(t, env, "migrate", "version"); got != versionLine(latest) {
			t.Fatalf("after switchyard %s, migrate version printed %q, want %q", name, got, versionLine(latest))
		}
	}
}

// The usage says "migrate up | down [N] | version [flags]": flags may follow
// the subcommand, and must then apply to it.
func TestMigrateFlagsAfterSubcommand(t *testing.T) {
	t.Parallel()
	empty := dbtest.NewEmptyDatabase(t)
	// The environment names a different, fully migrated database: a flag that
	// is silently ignored would show up as the wrong version.
	env := testEnv(t, dbtest.NewDatabase(t))

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stdout, stderr, err := runCmd(ctx, env, "migrate", "version", "--database-url", empty)
	if err != nil {
		t.Errorf("migrate version --database-url URL: %v\nstderr:\n%s", err, stderr)
	} else if stdout != versionLine(0) {
		t.Errorf("migrate version --database-url <empty db> printed %q, want %q (the flag after the subcommand was ignored)", stdout, versionLine(0))
	}

	stdout, stderr, err = runCmd(ctx, env, "migrate", "up", "--database-url", empty)
	if err != nil {
		t.Errorf("migrate up --database-url URL: %v\nstderr:\n%s", err, stderr)
	} else if stdout != versionLine(migrations.Latest()) {
		t.Errorf("migrate up --database-url <empty db> printed %q, want %q", stdout, versionLine(migrations.Latest()))
	}

	// Whatever else follows a subcommand is not silently dropped either:
	// up and down reject extra arguments, and so must version.
	if stdout, _, err := runCmd(ctx, env, "migrate", "version", "extra"); err == nil {
		t.Errorf("migrate version extra succeeded (printed %q), want an error like migrate up's", stdout)
	}
}

func TestMigrateDatabaseAhead(t *testing.T) {
	t.Parallel()
	latest := migrations.Latest()
	dbURL := dbtest.NewDatabase(t)
	env := testEnv(t, dbURL)
	execSQL(t, dbURL, "UPDATE schema_migrations SET version = $1", int64(latest+1))

	// Reading the version still works and shows the mismatch.
	if got, want := mustRun(t, env, "migrate", "version"), versionLine(latest+1); got != want {
		t.Errorf("migrate version printed %q, want %q", got, want)
	}
	for _, args := range [][]string{{"migrate", "up"}, {"migrate", "down", "1"}} {
		msg := runErr(t, env, args...)
		if !strings.Contains(msg, "upgrade") {
			t.Errorf("switchyard %s on a database ahead of the binary: error %q does not mention \"upgrade\"", strings.Join(args, " "), msg)
		}
	}
	// Nothing was touched.
	if got, want := mustRun(t, env, "migrate", "version"), versionLine(latest+1); got != want {
		t.Errorf("after refused migrations, migrate version printed %q, want %q", got, want)
	}

	msg := serveRefuses(t, env)
	if !strings.Contains(msg, "upgrade") {
		t.Errorf("serve on a database ahead of the binary: error %q does not mention \"upgrade\"", msg)
	}
}

func TestServeRefusesDatabaseBehind(t *testing.T) {
	t.Parallel()
	env := testEnv(t, dbtest.NewDatabase(t))
	mustRun(t, env, "migrate", "down", "1")

	msg := serveRefuses(t, env)
	if !strings.Contains(msg, "migrate up") {
		t.Errorf("serve on a database behind the binary: error %q does not mention \"migrate up\"", msg)
	}
}

func TestServeRefusesEmptyDatabase(t *testing.T) {
	t.Parallel()
	env := testEnv(t, dbtest.NewEmptyDatabase(t))
	msg := serveRefuses(t, env)
	if !strings.Contains(msg, "migrate up") {
		t.Errorf("serve on an empty database: error %q does not mention \"migrate up\"", msg)
	}
}

func TestServeRefusesDirtyDatabase(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	env := testEnv(t, dbURL)
	execSQL(t, dbURL, "UPDATE schema_migrations SET dirty = true")
	msg := serveRefuses(t, env)
	if !strings.Contains(msg, "dirty") {
		t.Errorf("serve on a dirty database: error %q does not mention \"dirty\"", msg)
	}
}

// serveRefuses runs serve, which must return an error promptly without
// starting its HTTP server, and returns the error message.
func serveRefuses(t *testing.T, env map[string]string, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	var stdout, stderr syncBuffer
	go func() {
		done <- run(ctx, append([]string{"switchyard", "serve"}, extra...), getenvOf(env), &stdout, &stderr)
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("serve returned nil, want an error\nstderr:\n%s", stderr.String())
		}
		assertNotListening(t, env["SWITCHYARD_HTTP_ADDR"])
		t.Logf("serve refused to start: %v", err)
		return err.Error()
	case <-time.After(pollFor):
		cancel()
		err := <-done
		t.Fatalf("serve kept running for %s instead of refusing to start (returned %v after cancel)\nstderr:\n%s", pollFor, err, stderr.String())
		return ""
	}
}
