package processing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/switchyard/switchyard/db"
	"github.com/switchyard/switchyard/handlers"
	"github.com/switchyard/switchyard/jobs"
)

// payload is the River job args type of every Switchyard task: the JSON
// arguments verbatim. River decodes each claimed job into a fresh payload,
// so retryAt carries the retry time from Work to NextRetry of the same run.
type payload struct {
	kind    string // set only on the registration value; River routes by the row's kind
	raw     json.RawMessage
	retryAt time.Time
}

func (p payload) Kind() string { return p.kind }

func (p payload) MarshalJSON() ([]byte, error) { return p.raw, nil }

func (p *payload) UnmarshalJSON(b []byte) error {
	p.raw = append(json.RawMessage(nil), b...)
	return nil
}

// ErrTimeout is the cancellation cause of a handler that ran past its
// timeout; the attempt's error wraps it.
var ErrTimeout = errors.New("task timed out")

// worker adapts one task type's handler to a River worker and runs the
// pipeline for each claimed task: guard, run under the timeout, classify,
// complete, release.
type worker struct {
	river.WorkerDefaults[payload]
	svc     *Service
	typ     *jobs.TaskType
	handler handlers.Handler
}

// Timeout disables River's own job timeout: the pipeline applies the task's
// timeout itself so it can tell a timeout from a cancellation.
func (w *worker) Timeout(*river.Job[payload]) time.Duration { return -1 }

// NextRetry returns the time Work chose from the type's RetryPolicy.
func (w *worker) NextRetry(job *river.Job[payload]) time.Time { return job.Args.retryAt }

// Work runs the pipeline for one claimed task. ctx is River's job context:
// River cancels it when the task is cancelled and on shutdown past the
// deadline.
func (w *worker) Work(ctx context.Context, job *river.Job[payload]) error {
	s := w.svc
	task := jobs.TaskFromRow(job.JobRow)
	queue := task.Queue
	if job.AttemptedAt != nil {
		s.metrics.QueueWait.WithLabelValues(task.Type, queue).Observe(max(job.AttemptedAt.Sub(job.ScheduledAt), 0).Seconds())
	}
	busy := s.metrics.WorkersBusy.WithLabelValues(queue)
	busy.Inc()
	defer busy.Dec()
	s.busy.add(queue, 1)
	defer s.busy.add(queue, -1)
	outcome := func(o string) { s.metrics.TasksTotal.WithLabelValues(task.Type, queue, o).Inc() }

	runCtx, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)

	// Step 2: the guard.
	var l *lease
	if s.guard != nil {
		var res guardResult
		l, res = s.guard.acquire(ctx, job.ID, cancelRun)
		switch {
		case res == guardContended:
			outcome("snoozed")
			return river.JobSnooze(s.cfg.Guard.ContendedSnooze)
		case res == guardUnavailable && s.cfg.Guard.Mode == GuardStrict:
			outcome("snoozed")
			return river.JobSnooze(s.cfg.Guard.UnavailableSnooze)
		}
	}

	// Workflow steps see their execution's context (input and outputs of
	// completed steps), from the Redis cache or Postgres.
	if ref := task.Workflow; ref != nil && s.workflow != nil && ref.Role == "task" {
		if err := s.workflow.StepStarted(ctx, claimOf(job), ref); err != nil {
			s.logger.Warn("record workflow step start", "task_id", job.ID, "err", err)
		}
		if err := s.workflow.LoadContext(ctx, ref); err != nil {
			if l != nil {
				l.release(ctx)
			}
			outcome("retried")
			return w.retry(job, task, fmt.Errorf("load workflow context: %w", err))
		}
	}

	// Step 3: run under the timeout.
	timeout := task.TimeoutOr(w.typ.Config.Timeout)
	timedCtx, cancelTimeout := context.WithTimeoutCause(runCtx, timeout, ErrTimeout)
	start := time.Now()
	out, err := call(timedCtx, w.handler, task)
	s.metrics.TaskDuration.WithLabelValues(task.Type, queue).Observe(time.Since(start).Seconds())
	timedOut := errors.Is(context.Cause(timedCtx), ErrTimeout)
	cancelTimeout()

	// Step 6 comes first for a lost lock: whoever holds it now may be
	// running the task, so this run must not complete.
	if l != nil && l.release(ctx) {
		outcome("lost")
		return w.retry(job, task, fmt.Errorf("%w while running; result dropped", errLockLost))
	}

	// Step 4: classify.
	switch {
	case ctx.Err() != nil && err != nil:
		// Cancelled by a user or its workflow, or shut down past the
		// deadline: River records a cancel as cancelled and a shutdown as
		// back in the queue with the attempt given back. Either needs the
		// context's error in the chain.
		if errors.Is(context.Cause(ctx), rivertype.ErrJobCancelledRemotely) {
			outcome("cancelled")
		} else {
			outcome("interrupted")
		}
		return fmt.Errorf("%w: %w", ctx.Err(), err)
	case timedOut && err != nil:
		err = fmt.Errorf("%w after %s: %w", ErrTimeout, timeout, err)
	}
	var snooze *jobs.SnoozeError
	if errors.As(err, &snooze) {
		outcome("snoozed")
		return river.JobSnooze(snooze.Duration)
	}
	var res jobs.Outcome
	switch {
	case err == nil:
		res = jobs.Outcome{Kind: jobs.OutcomeCompleted}
		if out != nil {
			if res.Output, err = json.Marshal(out); err != nil {
				res = jobs.Outcome{Kind: jobs.OutcomeFailed, Err: jobs.Permanent(fmt.Errorf("encode output: %w", err))}
			}
		}
	case w.typ.Config.Retry.ClassOf(err) == jobs.NonRetryable:
		res = jobs.Outcome{Kind: jobs.OutcomeFailed, Err: err}
	case job.Attempt >= job.MaxAttempts:
		res = jobs.Outcome{Kind: jobs.OutcomeFailed, Err: err}
	default:
		res = jobs.Outcome{Kind: jobs.OutcomeRetry, Err: err, RetryAt: time.Now().Add(w.policy(task).RetryDelay(job.Attempt, err))}
	}

	// Step 5: complete. A workflow step's outcome is recorded by the
	// engine in one transaction with the step's consequences, fenced on
	// the claim; other tasks' by River, with an update conditioned on the
	// task still being in progress.
	if ref := task.Workflow; ref != nil && s.workflow != nil {
		return w.finishStep(ctx, job, ref, res, outcome)
	}
	switch res.Kind {
	case jobs.OutcomeCompleted:
		if res.Output != nil {
			if err := river.RecordOutput(ctx, res.Output); err != nil {
				return w.fail(ctx, job, jobs.Permanent(fmt.Errorf("record output: %w", err)), outcome)
			}
		}
		outcome("completed")
		return nil
	case jobs.OutcomeFailed:
		if job.Attempt < job.MaxAttempts {
			return w.fail(ctx, job, res.Err, outcome)
		}
		outcome("failed") // River discards it: no attempts left
		return res.Err
	}
	outcome("retried")
	job.Args.retryAt = res.RetryAt
	return res.Err
}

// finishStep records a workflow step's outcome through the engine. When
// the engine wrote a final outcome, River's own completion afterwards
// finds the task no longer in progress and changes nothing; a retry is
// checked by the engine and written by River. A stale claim (the task moved
// on without this run) is dropped and the task snoozed, so no run of it is
// lost; an unreachable database leaves the outcome to River as a retry.
func (w *worker) finishStep(ctx context.Context, job *river.Job[payload], ref *jobs.WorkflowRef, res jobs.Outcome, outcome func(string)) error {
	err := w.svc.workflow.Finish(context.WithoutCancel(ctx), claimOf(job), ref, res)
	switch {
	case errors.Is(err, db.ErrStaleClaim):
		w.svc.metrics.StaleCompletions.Inc()
		outcome("lost")
		return river.JobSnooze(0)
	case err != nil:
		w.svc.logger.Error("record workflow step outcome; will retry", "task_id", job.ID, "err", err)
		outcome("retried")
		job.Args.retryAt = time.Now().Add(w.svc.cfg.Guard.UnavailableSnooze)
		return fmt.Errorf("record workflow step outcome: %w", err)
	}
	outcome(map[jobs.OutcomeKind]string{jobs.OutcomeCompleted: "completed", jobs.OutcomeFailed: "failed", jobs.OutcomeRetry: "retried"}[res.Kind])
	if res.Kind == jobs.OutcomeRetry {
		// The engine recorded the retry in the step's history and left the
		// task running under this claim; River moves it to retryable (or
		// available) now. Had the engine made it available itself, another
		// worker could claim it before River's completer flushes this
		// run's result, which is conditioned on the task being running,
		// not on the claim, and would then complete the new claim.
		job.Args.retryAt = res.RetryAt
		return res.Err
	}
	return nil
}

// policy is the task's retry policy: its own backoff if it carries one,
// else its type's.
func (w *worker) policy(task *jobs.Task) jobs.RetryPolicy {
	if task.Retry != nil {
		p := *task.Retry
		p.Classify = w.typ.Config.Retry.Classify
		return p
	}
	return w.typ.Config.Retry
}

// retry schedules the next attempt by the task's policy and returns err for
// River to record.
func (w *worker) retry(job *river.Job[payload], task *jobs.Task, err error) error {
	job.Args.retryAt = time.Now().Add(w.policy(task).RetryDelay(job.Attempt, err))
	return err
}

// claimOf is the claim of this run of job.
func claimOf(job *river.Job[payload]) db.Claim {
	return db.Claim{ID: job.ID, Attempt: job.Attempt, AttemptedAt: *job.AttemptedAt}
}

// fail discards the task now, whatever attempts remain. River cannot
// express this outcome, so the pipeline writes it, fenced on the claim;
// River's own completion that follows changes nothing because the task is
// no longer in progress.
func (w *worker) fail(ctx context.Context, job *river.Job[payload], err error, outcome func(string)) error {
	attemptErr, _ := json.Marshal(rivertype.AttemptError{At: time.Now().UTC(), Attempt: job.Attempt, Error: err.Error()})
	ok, dbErr := db.JobDiscardIfClaimed(context.WithoutCancel(ctx), w.svc.pool, claimOf(job), attemptErr)
	switch {
	case dbErr != nil:
		// Postgres is unreachable: fall back to a retry, which keeps the
		// task; it fails permanently on its next attempt.
		w.svc.logger.Error("discard task failed; will retry", "task_id", job.ID, "err", dbErr)
		outcome("retried")
		job.Args.retryAt = time.Now().Add(w.typ.Config.Retry.RetryDelay(job.Attempt, err))
		return err
	case !ok:
		w.svc.metrics.StaleCompletions.Inc()
	default:
		outcome("failed")
	}
	return err
}

// call runs the handler, turning a panic into a *jobs.PanicError.
func call(ctx context.Context, h handlers.Handler, task *jobs.Task) (out any, err error) {
	defer func() {
		if v := recover(); v != nil {
			out, err = nil, &jobs.PanicError{Value: v, Stack: string(debug.Stack())}
		}
	}()
	return h.ProcessTask(ctx, task)
}
