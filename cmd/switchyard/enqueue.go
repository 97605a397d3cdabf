package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/switchyard/switchyard/db"
	"github.com/switchyard/switchyard/handlers"
	"github.com/switchyard/switchyard/jobs"
)

// stringsFlag collects a repeatable flag.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

func runEnqueue(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var (
		conn     connFlags
		argsJSON string
		opts     jobs.EnqueueOptions
		tags     stringsFlag
		asJSON   bool
	)
	fs := newFlagSet("enqueue", stderr)
	conn.register(fs, false)
	fs.StringVar(&argsJSON, "args", "{}", "task arguments as a JSON object")
	fs.StringVar(&opts.Queue, "queue", "", "queue (default: the type's queue)")
	fs.IntVar(&opts.Priority, "priority", 0, "priority 1 (first) to 4 (default: the type's)")
	fs.DurationVar(&opts.Delay, "delay", 0, "run after this delay")
	fs.IntVar(&opts.MaxAttempts, "max-attempts", 0, "attempts before failing (default: the type's retry policy)")
	fs.DurationVar(&opts.Timeout, "timeout", 0, "timeout of each attempt (default: the type's)")
	fs.StringVar(&opts.IdempotencyKey, "idempotency-key", "", "return the existing task if one was enqueued with this key")
	fs.Var(&tags, "tag", "tag the task (repeatable)")
	fs.BoolVar(&asJSON, "json", false, "print the task as JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: switchyard enqueue TYPE [flags]")
		fs.PrintDefaults()
	}
	// The type comes first, flags after it, as the usage says.
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if help, err := parseFlags(fs, args); help || err != nil {
			return err
		}
		fs.Usage()
		return errors.New("enqueue: missing task TYPE")
	}
	taskType := args[0]
	if help, err := parseFlags(fs, args[1:]); help || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("enqueue: unexpected arguments %v", fs.Args())
	}
	// Only connection settings come from the environment; the task's own
	// flags do not.
	if err := applyEnv(fs, getenv, "args", "queue", "priority", "delay", "max-attempts", "timeout", "idempotency-key", "tag", "json"); err != nil {
		return err
	}
	opts.Tags = tags
	if !json.Valid([]byte(argsJSON)) {
		return fmt.Errorf("enqueue: --args is not valid JSON")
	}

	pool, err := db.NewPool(ctx, db.PoolConfig{URL: conn.databaseURL, MaxConns: 2})
	if err != nil {
		return err
	}
	defer pool.Close()
	registry := jobs.NewRegistry()
	if err := handlers.RegisterBuiltins(registry, handlers.NewMux(), handlers.BuiltinConfig{}); err != nil {
		return err
	}
	client, err := jobs.NewInsertOnlyClient(pool, registry)
	if err != nil {
		return err
	}
	res, err := client.Enqueue(ctx, jobs.RawArgs{Type: taskType, JSON: json.RawMessage(argsJSON)}, &opts)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res.Task)
	}
	verb := "enqueued"
	if res.Duplicate {
		verb = "already enqueued (idempotency key)"
	}
	t := res.Task
	fmt.Fprintf(stdout, "%s task %d: type=%s queue=%s state=%s scheduled_at=%s\n",
		verb, t.ID, t.Type, t.Queue, t.State, t.ScheduledAt.Format(time.RFC3339))
	return nil
}
