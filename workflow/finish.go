package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivertype"

	"github.com/switchyard/switchyard/db"
	"github.com/switchyard/switchyard/jobs"
)

// The engine as the processing pipeline sees it (processing.StepRecorder).

// StepStarted records that a step's handler began an attempt.
func (e *Engine) StepStarted(ctx context.Context, claim db.Claim, ref *jobs.WorkflowRef) error {
	return db.StepMarkStarted(ctx, e.pool, ref.ExecutionID, ref.Step, claim.ID, claim.Attempt)
}

// LoadContext fills ref.Input and ref.Outputs from the Redis cache, or from
// Postgres (refilling the cache) when the cache lacks the outputs of the
// step's dependencies.
func (e *Engine) LoadContext(ctx context.Context, ref *jobs.WorkflowRef) error {
	if input, outputs, ok := e.cache.get(ctx, ref.ExecutionID, ref.DependsOn); ok {
		ref.Input, ref.Outputs = input, outputs
		return nil
	}
	exec, err := db.ExecutionGet(ctx, e.pool, ref.ExecutionID)
	if err != nil {
		return translate(fmt.Sprintf("load context of execution %d", ref.ExecutionID), err)
	}
	outputs, err := db.StepOutputs(ctx, e.pool, ref.ExecutionID)
	if err != nil {
		return fmt.Errorf("load context of execution %d: %w", ref.ExecutionID, err)
	}
	ref.Input, ref.Outputs = exec.Input, outputs
	if !executionFinal(exec.Status) {
		e.cache.fill(ctx, exec.ID, exec.Input, outputs)
	}
	return nil
}

// Finish records the outcome of a task acting for a workflow step, and its
// consequences, in one transaction: lock the execution, write the task's
// outcome fenced on the claim (db.ErrStaleClaim if the claim is no longer
// current: nothing is written), then advance the execution. The lock is
// taken before the task's row, the order every engine transaction uses.
func (e *Engine) Finish(ctx context.Context, claim db.Claim, ref *jobs.WorkflowRef, res jobs.Outcome) error {
	var c *change
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		var err error
		if c, err = e.load(ctx, tx, ref.ExecutionID); err != nil {
			return err
		}
		if err := recordOutcome(ctx, tx, claim, res); err != nil {
			return err
		}
		if err := c.onOutcome(ctx, claim, ref, res); err != nil {
			return err
		}
		return c.flush(ctx)
	})
	if err != nil {
		return err
	}
	c.afterCommit(ctx)
	return nil
}

// recordOutcome writes the task's own state, fenced on the claim.
func recordOutcome(ctx context.Context, tx pgx.Tx, claim db.Claim, res jobs.Outcome) error {
	var (
		ok  bool
		err error
	)
	attemptErr := func() []byte {
		b, _ := json.Marshal(rivertype.AttemptError{At: time.Now().UTC(), Attempt: claim.Attempt, Error: res.Err.Error()})
		return b
	}
	switch res.Kind {
	case jobs.OutcomeCompleted:
		ok, err = db.JobCompleteIfClaimed(ctx, tx, claim, res.Output)
	case jobs.OutcomeRetry:
		ok, err = db.JobRetryIfClaimed(ctx, tx, claim, res.RetryAt, attemptErr())
	case jobs.OutcomeFailed:
		ok, err = db.JobDiscardIfClaimed(ctx, tx, claim, attemptErr())
	default:
		return fmt.Errorf("record outcome: unknown kind %q", res.Kind)
	}
	if err != nil {
		return err
	}
	if !ok {
		return db.ErrStaleClaim
	}
	return nil
}

// onOutcome applies a task's outcome to the execution.
func (c *change) onOutcome(ctx context.Context, claim db.Claim, ref *jobs.WorkflowRef, res jobs.Outcome) error {
	if executionFinal(c.exec.Status) {
		return nil // e.g. a task finishing after its execution was cancelled
	}
	s := c.byKey[ref.Step]
	current := s != nil && s.TaskID != nil && *s.TaskID == claim.ID
	switch ref.Role {
	case "task":
		if !current || stepFinal(s.Status) {
			return nil // a task of an earlier run of the step (before a retry)
		}
		switch res.Kind {
		case jobs.OutcomeCompleted:
			c.complete(s, res.Output)
		case jobs.OutcomeRetry:
			s.Attempt = claim.Attempt
			c.touch(s)
			c.event("step_retried", s, map[string]any{"attempt": claim.Attempt, "error": res.Err.Error(), "retry_at": res.RetryAt})
		case jobs.OutcomeFailed:
			s.Attempt = claim.Attempt
			if err := c.fail(ctx, s, StepFailed, res.Err.Error()); err != nil {
				return err
			}
		}
	case "delay":
		if current && s.Status == StepWaiting {
			c.complete(s, mustJSON(map[string]any{"fired_at": time.Now().UTC()}))
		}
	case "wait_timeout":
		if current && s.Status == StepWaiting {
			sp := c.spec(s)
			msg := fmt.Sprintf("no %q signal within %s", sp.Wait.Signal, time.Duration(sp.Wait.Timeout))
			if err := c.fail(ctx, s, StepFailed, msg); err != nil {
				return err
			}
		}
	case "execution_timeout":
		if c.exec.TimeoutTaskID != nil && *c.exec.TimeoutTaskID == claim.ID {
			msg := fmt.Sprintf("execution timed out after %s", time.Duration(*c.exec.TimeoutMS)*time.Millisecond)
			if err := c.stop(ctx, StatusTimedOut, msg, StepCancelled); err != nil {
				return err
			}
		}
	case "child_finished":
		if s == nil || s.Status != StepRunning || s.ChildExecutionID == nil || *s.ChildExecutionID != ref.ChildID {
			return nil
		}
		child, err := db.ExecutionGet(ctx, c.tx, ref.ChildID)
		if err != nil {
			return err
		}
		switch child.Status {
		case StatusCompleted:
			outputs, err := db.StepOutputs(ctx, c.tx, child.ID)
			if err != nil {
				return err
			}
			c.complete(s, mustJSON(map[string]any{"execution_id": child.ID, "outputs": outputs}))
		case StatusCancelled:
			if err := c.fail(ctx, s, StepCancelled, fmt.Sprintf("child execution %d was cancelled", child.ID)); err != nil {
				return err
			}
		default:
			msg := fmt.Sprintf("child execution %d %s", child.ID, child.Status)
			if child.Error != nil {
				msg += ": " + *child.Error
			}
			if err := c.fail(ctx, s, StepFailed, msg); err != nil {
				return err
			}
		}
	case "cancel":
		// The execution is a child whose parent stopped.
		if err := c.stop(ctx, StatusCancelled, "parent execution stopped", StepCancelled); err != nil {
			return err
		}
	}
	return c.advance(ctx)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called with maps of JSON-safe values
	}
	return b
}
