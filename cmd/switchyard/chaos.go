package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"github.com/switchyard/switchyard/chaos"
)

// runChaos is `switchyard chaos`: the chaos suite (package chaos) against
// its own Postgres and Redis. It reads no SWITCHYARD_* environment
// variables on purpose: `make` exports the shared development instance's
// URLs, and the suite restarts its services, so it must never be pointed
// at them by accident.
func runChaos(ctx context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) error {
	var (
		cfg      chaos.Config
		seed     uint64
		jsonOut  bool
		useFixed bool
	)
	fs := newFlagSet("chaos", stderr)
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Minute, "how long to produce work and inject faults (the drain follows)")
	fs.IntVar(&cfg.Pods, "pods", 3, "worker pods (processes of this binary running serve --chaos-handlers)")
	fs.Float64Var(&cfg.Rate, "rate", 50, "chaos.work tasks enqueued per second")
	fs.Float64Var(&cfg.WorkflowRate, "workflow-rate", 2, "workflow executions started per second")
	fs.DurationVar(&cfg.Periods.Kill, "kill-every", 20*time.Second, "mean interval between SIGKILLs of a random pod (0: none)")
	fs.DurationVar(&cfg.Periods.RedisRestart, "redis-restart-every", 45*time.Second, "mean interval between Redis restarts (0: none)")
	fs.DurationVar(&cfg.Periods.PGRestart, "pg-restart-every", 90*time.Second, "mean interval between Postgres restarts (0: none)")
	fs.DurationVar(&cfg.Periods.Pause, "pause-every", 0, "mean interval between pauses of a random pod: SIGSTOP, then SIGCONT after --pause-for (0: none)")
	fs.DurationVar(&cfg.PauseFor, "pause-for", 6*time.Second, "how long a paused pod stays stopped (longer than rescue-after plus the guard TTL, 6s, makes others take it for dead)")
	fs.DurationVar(&cfg.PGOutage, "pg-outage", 0, "keep Postgres down this long in each Postgres restart (stop, wait, start; 0: pg_ctl restart -m fast)")
	fs.StringVar(&cfg.Schedule, "schedule", chaos.ScheduleRandom, "fault schedule: random (intervals drawn from 0.5-1.5x the period) or fixed (exact periods, staggered; every kind whose period fits fires at least once)")
	fs.BoolVar(&useFixed, "fixed", false, "shorthand for --schedule fixed")
	fs.Uint64Var(&seed, "seed", 0, "seed of the schedule, the pods killed and the task mix (0: random, printed)")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", 3*time.Minute, "how long pods may take to finish everything expected after production stops")
	fs.IntVar(&cfg.ExecutorSize, "executor-size", 10, "each pod's executor size for chaos.work")
	fs.StringVar(&cfg.Dir, "dir", ".local/chaos", "directory of the suite's Postgres and Redis data, pod logs and services log")
	fs.StringVar(&cfg.ServicesScript, "services-script", "scripts/chaos-services.sh", "script that starts, stops and restarts the suite's services")
	fs.IntVar(&cfg.PGPort, "pg-port", 25442, "port of the suite's own Postgres (never the shared one)")
	fs.IntVar(&cfg.RedisPort, "redis-port", 26389, "port of the suite's own Redis (never the shared one)")
	fs.IntVar(&cfg.HTTPPortBase, "http-port-base", 18640, "pod slot i serves /readyz and /metrics on 127.0.0.1:(base+i)")
	fs.BoolVar(&cfg.KeepServices, "keep-services", false, "leave the suite's Postgres and Redis running at the end")
	fs.BoolVar(&jsonOut, "json", false, "print the report as JSON")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("chaos takes no arguments, got %q", fs.Args())
	}
	if useFixed {
		cfg.Schedule = chaos.ScheduleFixed
	}
	if cfg.Pods < 1 || cfg.Duration <= 0 || cfg.Rate < 0 || cfg.WorkflowRate < 0 || cfg.ExecutorSize < 1 {
		return errors.New("chaos: --pods, --duration and --executor-size must be positive, rates not negative")
	}
	if seed == 0 {
		seed = rand.Uint64()>>1 | 1
	}
	cfg.Seed = seed
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("chaos: find this binary: %w", err)
	}
	cfg.Executable = exe
	cfg.Log = stderr

	rep, err := chaos.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	if !rep.OK() {
		return fmt.Errorf("chaos: %d checks failed (seed %d)", len(rep.Problems), rep.Seed)
	}
	return nil
}
