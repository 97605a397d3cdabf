package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/switchyard/switchyard/bench"
)

// runBench runs the benchmark scenarios against the local Postgres and
// Redis, each in databases of its own, and prints the figures next to their
// same-run baselines.
func runBench(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var (
		dbURL     string
		redisURL  string
		quick     bool
		tiny      bool
		jsonOut   string
		scenarios string
		binary    string
		profiles  string
	)
	fs := newFlagSet("bench", stderr)
	fs.StringVar(&dbURL, "database-url", "postgres://postgres@127.0.0.1:55432/switchyard?sslmode=disable",
		"Postgres URL: the bench creates (and drops) its own databases on this server")
	fs.StringVar(&redisURL, "redis-url", "redis://127.0.0.1:56379/0", "Redis URL (guard locks, workflow context cache), used under a key prefix of the run")
	fs.BoolVar(&quick, "quick", false, "the smaller set (about two minutes) instead of the standard one (about ten)")
	fs.BoolVar(&tiny, "tiny", false, "a smoke run of seconds (about 1,000 tasks per scenario); its figures mean nothing")
	fs.StringVar(&jsonOut, "json", "", "also write the report as JSON to this file (- for stdout; the table then goes to stderr)")
	fs.StringVar(&scenarios, "scenarios", strings.Join(bench.Scenarios, ","), "comma-separated scenarios to run")
	fs.StringVar(&binary, "binary", "", "switchyard executable to start as the memory scenario's worker process (default: this one)")
	fs.StringVar(&profiles, "profile-dir", "", "write a CPU profile of each timed measurement (this process) into this directory")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: switchyard bench [--quick] [--json FILE|-] [--scenarios %s]\n\n", strings.Join(bench.Scenarios, ","))
		fs.PrintDefaults()
	}
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench: unexpected arguments %q", fs.Args())
	}
	// Only the connection settings come from the environment: the bench's
	// own flags describe one run.
	if err := applyEnv(fs, getenv, "quick", "tiny", "json", "scenarios", "binary", "profile-dir"); err != nil {
		return err
	}
	if quick && tiny {
		return errors.New("bench: --quick and --tiny exclude each other")
	}
	mode := bench.ModeFull
	switch {
	case quick:
		mode = bench.ModeQuick
	case tiny:
		mode = bench.ModeTiny
	}
	if binary == "" {
		if exe, err := os.Executable(); err == nil {
			binary = exe
		}
	}
	table := stdout
	if jsonOut == "-" {
		table = stderr
	}
	rep, err := bench.Run(ctx, bench.Config{
		DatabaseURL: dbURL,
		RedisURL:    redisURL,
		Mode:        mode,
		Scenarios:   strings.Split(scenarios, ","),
		Binary:      binary,
		Progress:    stderr,
		Version:     buildVersion(),
		ProfileDir:  profiles,
	})
	if rep == nil {
		return err
	}
	fmt.Fprintf(table, "\nswitchyard bench (%s) on %d CPUs, %.1f GiB, Postgres %s (fsync=%s), %s, %.0fs\n\n",
		rep.Mode, rep.Machine.CPUs, float64(rep.Machine.MemoryBytes)/(1<<30), rep.Machine.PostgresVersion,
		rep.Machine.PostgresFsync, rep.StartedAt.Format("2006-01-02 15:04 MST"), rep.Seconds)
	if werr := rep.WriteTable(table); werr != nil {
		return werr
	}
	if jsonOut != "" {
		if werr := writeJSONReport(rep, jsonOut, stdout); werr != nil {
			return werr
		}
	}
	if err != nil {
		return err
	}
	for _, s := range rep.Scenarios {
		if s.Error != "" {
			return fmt.Errorf("bench: scenario %s failed: %s", s.Name, s.Error)
		}
	}
	return nil
}

func writeJSONReport(rep *bench.Report, path string, stdout io.Writer) error {
	if path == "-" {
		return rep.WriteJSON(stdout)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := rep.WriteJSON(f); err != nil {
		f.Close()
		return fmt.Errorf("bench: write %s: %w", path, err)
	}
	return f.Close()
}
