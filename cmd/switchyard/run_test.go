package main

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/dbtest"
)

func TestVersionCommand(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"version", "--version", "-v"} {
		stdout, stderr, err := runCmd(t.Context(), map[string]string{}, arg)
		if err != nil {
			t.Fatalf("switchyard %s: %v", arg, err)
		}
		if !strings.HasPrefix(stdout, "switchyard ") || strings.TrimSpace(strings.TrimPrefix(stdout, "switchyard ")) == "" {
			t.Errorf("switchyard %s printed %q, want \"switchyard <version>\"", arg, stdout)
		}
		if stderr != "" {
			t.Errorf("switchyard %s wrote to stderr: %q", arg, stderr)
		}
	}
}

func TestNoCommand(t *testing.T) {
	t.Parallel()
	var stdout, stderr syncBuffer
	err := run(t.Context(), []string{"switchyard"}, getenvOf(nil), &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "no command") {
		t.Errorf("run with no command: error %v, want one saying no command was given", err)
	}
	if !strings.Contains(stderr.String(), "Usage:") {
		t.Errorf("run with no command printed no usage to stderr: %q", stderr.String())
	}
}

func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	stdout, stderr, err := runCmd(t.Context(), nil, "frob")
	if err == nil || !strings.Contains(err.Error(), `"frob"`) {
		t.Errorf("switchyard frob: error %v, want one naming \"frob\"", err)
	}
	if !strings.Contains(stderr, "Usage:") || stdout != "" {
		t.Errorf("switchyard frob: stdout %q, stderr %q; want the usage on stderr only", stdout, stderr)
	}
}

func TestHelpCommand(t *testing.T) {
	t.Parallel()
	stdout, _, err := runCmd(t.Context(), nil, "help")
	if err != nil {
		t.Fatalf("switchyard help: %v", err)
	}
	for _, cmd := range []string{"serve", "migrate", "enqueue", "demo", "version"} {
		if !strings.Contains(stdout, "switchyard "+cmd) {
			t.Errorf("help does not list %s:\n%s", cmd, stdout)
		}
	}
}

// -h prints a command's flags and is not an error; serve does not start.
func TestCommandHelp(t *testing.T) {
	t.Parallel()
	env := testEnv(t, "postgres://nobody@127.0.0.1:1/none?sslmode=disable")
	for _, args := range [][]string{
		{"serve", "-h"},
		{"migrate", "-h"},
		{"enqueue", "-h"},
		{"enqueue", "noop", "-h"},
		{"demo", "-h"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), pollFor)
		_, stderr, err := runCmd(ctx, env, args...)
		cancel()
		if err != nil {
			t.Errorf("switchyard %s: %v", strings.Join(args, " "), err)
		}
		if !strings.Contains(stderr, "-database-url") {
			t.Errorf("switchyard %s printed no flags to stderr:\n%s", strings.Join(args, " "), stderr)
		}
	}
	assertNotListening(t, env["SWITCHYARD_HTTP_ADDR"])
}

func TestServeQueuesFromEnv(t *testing.T) {
	t.Parallel()
	env := testEnv(t, dbtest.NewDatabase(t))
	env["SWITCHYARD_QUEUES"] = "default=3,email=2"
	srv := startServe(t, env)
	body := srv.metricsBody(t)
	for _, want := range []string{
		`switchyard_workers_max{queue="default"} 3`,
		`switchyard_workers_max{queue="email"} 2`,
	} {
		if !hasLine(body, want) {
			t.Errorf("/metrics has no line %s; got:\n%s", want, grepLines(body, "switchyard_workers_max"))
		}
	}
	if err := srv.stop(t); err != nil {
		t.Errorf("serve returned %v after cancellation, want nil", err)
	}
}

func TestServeFlagWinsOverEnv(t *testing.T) {
	t.Parallel()
	env := testEnv(t, dbtest.NewDatabase(t))
	env["SWITCHYARD_QUEUES"] = "default=3"
	// A bad value in the environment does not matter when the flag is given.
	env["SWITCHYARD_GUARD_MODE"] = "sometimes"
	srv := startServe(t, env, "--queues", "default=2", "--guard-mode", "off")
	body := srv.metricsBody(t)
	if want := `switchyard_workers_max{queue="default"} 2`; !hasLine(body, want) {
		t.Errorf("/metrics has no line %s; got:\n%s", want, grepLines(body, "switchyard_workers_max"))
	}
	if err := srv.stop(t); err != nil {
		t.Errorf("serve returned %v after cancellation, want nil", err)
	}
}

func TestServeBadSettings(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	for _, c := range []struct {
		name  string
		env   map[string]string
		args  []string
		names []string // the error must name one of these
	}{
		{"guard mode from env", map[string]string{"SWITCHYARD_GUARD_MODE": "sometimes"}, nil, []string{"SWITCHYARD_GUARD_MODE", "guard-mode"}},
		{"queues from env", map[string]string{"SWITCHYARD_QUEUES": "x=0"}, nil, []string{"SWITCHYARD_QUEUES", "queues"}},
		{"queues not a number", map[string]string{"SWITCHYARD_QUEUES": "default=many"}, nil, []string{"SWITCHYARD_QUEUES", "queues"}},
		{"queue listed twice", map[string]string{"SWITCHYARD_QUEUES": "a=1,a=2"}, nil, []string{"SWITCHYARD_QUEUES", "queues"}},
		{"guard ttl from env", map[string]string{"SWITCHYARD_GUARD_TTL": "soon"}, nil, []string{"SWITCHYARD_GUARD_TTL", "guard-ttl"}},
		{"log level from env", map[string]string{"SWITCHYARD_LOG_LEVEL": "loud"}, nil, []string{"SWITCHYARD_LOG_LEVEL", "log-level"}},
		{"log format from env", map[string]string{"SWITCHYARD_LOG_FORMAT": "xml"}, nil, []string{"SWITCHYARD_LOG_FORMAT", "log-format"}},
		{"queues flag", nil, []string{"--queues", "x=0"}, []string{"queues"}},
		{"guard mode flag", nil, []string{"--guard-mode", "sometimes"}, []string{"guard-mode"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := testEnv(t, dbURL)
			for k, v := range c.env {
				env[k] = v
			}
			msg := serveRefuses(t, env, c.args...)
			named := false
			for _, n := range c.names {
				named = named || strings.Contains(msg, n)
			}
			if !named {
				t.Errorf("serve error %q names none of %v", msg, c.names)
			}
		})
	}
}

func TestMigrateSettingsFromEnvAndFlag(t *testing.T) {
	t.Parallel()
	// The environment points at a database that does not exist; the flag
	// before the subcommand at a real one, and wins.
	good := dbtest.NewDatabase(t)
	missing, err := url.Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	missing.Path += "_missing"
	env := testEnv(t, missing.String())
	ctx, cancel := context.WithTimeout(t.Context(), pollFor)
	defer cancel()
	if _, _, err := runCmd(ctx, env, "migrate", "version"); err == nil {
		t.Errorf("migrate version against a missing database succeeded")
	}
	out := mustRun(t, env, "migrate", "--database-url", good, "version")
	if !strings.HasPrefix(out, "schema version ") {
		t.Errorf("migrate --database-url URL version printed %q", out)
	}
}
