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
//
// Starts that arrive together are written together (see startBatched).
func (e *Engine) StepStarted(ctx context.Context, claim db.Claim, ref *jobs.WorkflowRef) error {
	return e.startBatched(ctx, db.StepStart{ExecutionID: ref.ExecutionID, Key: ref.Step, TaskID: claim.ID, Attempt: claim.Attempt})
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
	if !ExecutionFinal(exec.Status) {
		e.cache.fill(ctx, exec.ID, exec.Input, outputs)
	}
	return nil
}

// Finish records the outcome of a task acting for a workflow step, and its
// consequences, in one transaction: lock the execution, write the task's
// outcome fenced on the claim (db.ErrStaleClaim if the claim is no longer
// current: nothing is written; a retry is only checked, and River writes
// it when the worker returns the error), then advance the execution. The
// lock is taken before the task's row, the order every engine transaction
// uses.
//
// Outcomes of one execution that arrive together share the transaction
// (see finishBatched): they serialise on the execution's lock anyway.
func (e *Engine) Finish(ctx context.Context, claim db.Claim, ref *jobs.WorkflowRef, res jobs.Outcome) error {
	return e.finishBatched(ctx, claim, ref, res)
}

// recordOutcome writes the task's own state, fenced on the claim: a final
// one (completed, discarded) here; for a retry it only checks the claim,
// and the worker leaves the transition to River (see processing's
// finishStep).
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
		// Only checked (and locked), not written: River writes the retry
		// when the worker returns the error. Writing it here would make the
		// task claimable again before River's completer has flushed this
		// run's result, and that result (conditioned on the task being
		// running, not on the claim) would then land on the next claim.
		ok, err = db.JobLockIfClaimed(ctx, tx, claim)
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
	if ExecutionFinal(c.exec.Status) {
		return nil // e.g. a task finishing after its execution was cancelled
	}
	s := c.byKey[ref.Step]
	current := s != nil && s.TaskID != nil && *s.TaskID == claim.ID
	switch ref.Role {
	case "task":
		if !current || StepFinal(s.Status) {
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
