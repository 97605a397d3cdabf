package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/switchyard/switchyard/migrations"
)

func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var conn connFlags
	fs := newFlagSet("migrate", stderr)
	conn.register(fs, false)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: switchyard migrate up | down [N] | version [flags]")
		fs.PrintDefaults()
	}
	// Flags may come before or after the subcommand and its N, as the
	// usage shows; the flag package stops at the first word, so parse on.
	var rest []string
	for remaining := args; ; {
		if help, err := parseFlags(fs, remaining); help || err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
		remaining = fs.Args()[1:]
	}
	if err := applyEnv(fs, getenv); err != nil {
		return err
	}
	if len(rest) == 0 {
		fs.Usage()
		return fmt.Errorf("migrate: missing subcommand")
	}
	mig, err := migrations.New(conn.databaseURL)
	if err != nil {
		return err
	}
	defer mig.Close()

	switch rest[0] {
	case "up":
		if len(rest) > 1 {
			return fmt.Errorf("migrate up takes no arguments")
		}
		if err := mig.Up(ctx); err != nil {
			return err
		}
	case "down":
		n := 1
		if len(rest) > 2 {
			return fmt.Errorf("migrate down takes at most one argument, N")
		}
		if len(rest) == 2 {
			n, err = strconv.Atoi(rest[1])
			if err != nil || n < 1 {
				return fmt.Errorf("migrate down %q: N must be a positive integer", rest[1])
			}
		}
		if err := mig.Down(ctx, n); err != nil {
			return err
		}
	case "version":
		if len(rest) > 1 {
			return fmt.Errorf("migrate version takes no arguments")
		}
	default:
		fs.Usage()
		return fmt.Errorf("migrate: unknown subcommand %q", rest[0])
	}
	v, dirty, err := mig.Version(ctx)
	if err != nil {
		return err
	}
	state := ""
	if dirty {
		state = " (dirty)"
	}
	fmt.Fprintf(stdout, "schema version %d%s; this binary's latest is %d\n", v, state, migrations.Latest())
	return nil
}
