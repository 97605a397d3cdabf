package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `switchyard — a Postgres task queue

Usage:
  switchyard serve    [flags]                 run workers for the configured queues, plus /metrics, /healthz, /readyz
  switchyard migrate  up | down [N] | version apply, roll back or show the schema version
  switchyard enqueue  TYPE --args JSON [flags] enqueue one task
  switchyard demo     [flags]                 enqueue a mix of tasks and show them move through states
  switchyard chaos    [flags]                 kill pods, restart Redis and Postgres under load, verify nothing is lost
  switchyard task     SUBCOMMAND ...          enqueue, get, list, cancel or retry tasks through the HTTP API
  switchyard queue    list | pause | resume   list, pause or resume queues through the HTTP API
  switchyard workflow SUBCOMMAND ...          start, inspect, signal or control workflow executions through the HTTP API
  switchyard workers                          list the live worker pods through the HTTP API
  switchyard bench    [--quick] [flags]       benchmark against raw River in one run (local Postgres and Redis)
  switchyard version                          print the version

Settings can also be set by environment variables: --database-url is
SWITCHYARD_DATABASE_URL, --guard-mode is SWITCHYARD_GUARD_MODE, --server is
SWITCHYARD_URL, and so on; flags that describe one call (a task's args, an
id, a key) are flags only.
Run "switchyard COMMAND -h" for a command's flags.
`

// run is the whole program: main only calls it. getenv, stdout and stderr
// are parameters so tests can run commands in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) < 2 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	cmd, rest := args[1], args[2:]
	switch cmd {
	case "serve":
		return runServe(ctx, rest, getenv, stdout, stderr)
	case "migrate":
		return runMigrate(ctx, rest, getenv, stdout, stderr)
	case "enqueue":
		return runEnqueue(ctx, rest, getenv, stdout, stderr)
	case "demo":
		return runDemo(ctx, rest, getenv, stdout, stderr)
	case "chaos":
		return runChaos(ctx, rest, getenv, stdout, stderr)
	case "task":
		return runTask(ctx, rest, getenv, stdout, stderr)
	case "queue":
		return runQueue(ctx, rest, getenv, stdout, stderr)
	case "workflow":
		return runWorkflow(ctx, rest, getenv, stdout, stderr)
	case "workers":
		return runWorkers(ctx, rest, getenv, stdout, stderr)
	case "bench":
		return runBench(ctx, rest, getenv, stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "switchyard", buildVersion())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}

// buildVersion is the -ldflags version, or the module version when built
// with go install.
func buildVersion() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version
}

// newFlagSet returns a flag set whose errors go to stderr and are
// returned, not exited on.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("switchyard "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses args, treating -h as success.
func parseFlags(fs *flag.FlagSet, args []string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, err
	}
	return false, nil
}

// envName is the environment variable of a flag: --guard-ttl is
// SWITCHYARD_GUARD_TTL.
func envName(flagName string) string {
	return "SWITCHYARD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}
