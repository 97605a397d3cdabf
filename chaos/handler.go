package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/handlers"
	"github.com/switchyard/switchyard/jobs"
)

// TaskType is the task type of the chaos suite's work.
const TaskType = "chaos.work"

// Queue is the queue chaos.work tasks go to.
const Queue = "default"

// WorkArgs are the arguments of a chaos.work task.
type WorkArgs struct {
	// SleepMS is how long the handler works, in milliseconds.
	SleepMS int `json:"sleep_ms"`
	// FailFirst makes the first attempt fail (retried by the policy).
	FailFirst bool `json:"fail_first,omitempty"`
	// FailPermanent makes every attempt fail permanently: the task is
	// designed to end failed.
	FailPermanent bool `json:"fail_permanent,omitempty"`
}

// TaskType implements jobs.Args.
func (WorkArgs) TaskType() string { return TaskType }

// Validate implements jobs.Validator.
func (a WorkArgs) Validate() error {
	if a.SleepMS < 0 || a.SleepMS > 60_000 {
		return &jobs.ValidationError{Field: "args.sleep_ms", Message: "must be 0 to 60000"}
	}
	return nil
}

// typeConfig gives chaos.work many attempts with short backoffs, so
// attempts lost to faults (a lost guard lock, Postgres down at completion)
// never exhaust a task that should complete, and retries come back within
// the run.
func typeConfig() jobs.TypeConfig {
	return jobs.TypeConfig{
		Queue:   Queue,
		Timeout: 30 * time.Second,
		Retry: jobs.RetryPolicy{
			MaxAttempts:    25,
			InitialBackoff: 200 * time.Millisecond,
			Multiplier:     2,
			MaxBackoff:     5 * time.Second,
			Jitter:         0.2,
		},
	}
}

// RegisterTypes registers chaos.work in reg (producers need the type, not
// the handler).
func RegisterTypes(reg *jobs.Registry) error {
	if err := jobs.Register[WorkArgs](reg, typeConfig()); err != nil {
		return fmt.Errorf("register chaos task type: %w", err)
	}
	return nil
}

// HandlerDeps are what the chaos.work handler needs of its pod.
type HandlerDeps struct {
	// Pool is the pod's Postgres pool; the handler writes the ledger and
	// its effect through it.
	Pool *pgxpool.Pool
	// PodID is the pod's id (processing.Config.ID), recorded with each run.
	PodID  string
	Logger *slog.Logger
}

// Register registers chaos.work in reg and its handler in mux (what `serve
// --chaos-handlers` does). The handler needs the suite's tables
// (CreateTables); `switchyard chaos` creates them before it starts pods.
func Register(reg *jobs.Registry, mux *handlers.Mux, deps HandlerDeps) error {
	if deps.Pool == nil || deps.PodID == "" {
		return errors.New("chaos: the handler needs a pool and the pod id")
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if err := RegisterTypes(reg); err != nil {
		return err
	}
	mux.Handle(TaskType, &handler{pool: deps.Pool, pod: deps.PodID, logger: deps.Logger})
	return nil
}

// Run outcomes recorded in chaos_ledger.outcome. A row whose outcome is
// null is a run that never finished: its pod died, or it was cancelled or
// could not reach Postgres at the end.
const (
	outcomeDone   = "done"   // the effect was applied
	outcomeError  = "error"  // failed on purpose (fail_first); retried
	outcomeFailed = "failed" // failed permanently on purpose (fail_permanent)
)

type handler struct {
	pool   *pgxpool.Pool
	pod    string
	logger *slog.Logger
}

const ledgerStartSQL = `
INSERT INTO chaos_ledger (task_id, attempt, attempted_at, pod, started_at, execution_id, step)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING id`

const ledgerFinishSQL = `
UPDATE chaos_ledger SET finished_at = $2, outcome = $3 WHERE id = $1`

const ledgerInsertFinishedSQL = `
INSERT INTO chaos_ledger (task_id, attempt, attempted_at, pod, started_at, execution_id, step, finished_at, outcome)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`

const effectApplySQL = `
INSERT INTO chaos_effect (task_id, applied) VALUES ($1, 1)
ON CONFLICT (task_id) DO UPDATE SET applied = chaos_effect.applied + 1`

// ledgerStartTimeout bounds the start row's insert: it is best effort, and
// a Postgres restart must not hold the run up.
const ledgerStartTimeout = 2 * time.Second

// ProcessTask records the run's start, works for SleepMS, then writes the
// run's end and its effect in one transaction. The start row is best
// effort (Postgres may be restarting); the final transaction writes the
// whole row when the start row is missing, so every run that applied its
// effect has exactly one row with outcome 'done'.
func (h *handler) ProcessTask(ctx context.Context, task *jobs.Task) (any, error) {
	started := time.Now()
	var args WorkArgs
	if err := json.Unmarshal(task.Args, &args); err != nil {
		return nil, jobs.Permanent(fmt.Errorf("decode args: %w", err))
	}
	var (
		executionID *int64
		step        *string
	)
	if ref := task.Workflow; ref != nil {
		executionID, step = &ref.ExecutionID, &ref.Step
	}

	var rowID int64
	startCtx, cancel := context.WithTimeout(ctx, ledgerStartTimeout)
	err := h.pool.QueryRow(startCtx, ledgerStartSQL, task.ID, task.Attempt, task.AttemptedAt, h.pod, started, executionID, step).Scan(&rowID)
	cancel()
	if err != nil {
		rowID = 0
		h.logger.Warn("chaos: ledger start row not written; the end row will be", "task_id", task.ID, "err", err)
	}

	if args.SleepMS > 0 {
		timer := time.NewTimer(time.Duration(args.SleepMS) * time.Millisecond)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, fmt.Errorf("chaos: interrupted after %s: %w", time.Since(started).Round(time.Millisecond), context.Cause(ctx))
		case <-timer.C:
		}
	}

	outcome := outcomeDone
	switch {
	case args.FailPermanent:
		outcome = outcomeFailed
	case args.FailFirst && task.Attempt == 1:
		outcome = outcomeError
	}
	finished := time.Now()
	err = pgx.BeginFunc(ctx, h.pool, func(tx pgx.Tx) error {
		if outcome == outcomeDone {
			if _, err := tx.Exec(ctx, effectApplySQL, task.ID); err != nil {
				return err
			}
		}
		if rowID != 0 {
			_, err := tx.Exec(ctx, ledgerFinishSQL, rowID, finished, outcome)
			return err
		}
		_, err := tx.Exec(ctx, ledgerInsertFinishedSQL, task.ID, task.Attempt, task.AttemptedAt, h.pod, started, executionID, step, finished, outcome)
		return err
	})
	if err != nil {
		// Nothing was applied; the attempt is retried.
		return nil, fmt.Errorf("chaos: record effect: %w", err)
	}
	switch outcome {
	case outcomeFailed:
		return nil, jobs.Permanent(errors.New("chaos: fails permanently on purpose"))
	case outcomeError:
		return nil, errors.New("chaos: first attempt fails on purpose")
	}
	return map[string]any{"pod": h.pod, "slept_ms": args.SleepMS}, nil
}
