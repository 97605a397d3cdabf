package db

import (
	"context"
	"errors"
	"time"
)

// Queries Switchyard runs on River's river_job table, beyond River's own
// client API. Every write is fenced on the claim: id, state 'running',
// attempt and attempted_at. The attempt alone is not enough because a
// snooze gives the next run the same attempt number.

// ErrStaleClaim is returned when a fenced write finds that the claim is no
// longer current: the task was rescued, cancelled or completed by another
// run. The write changed nothing.
var ErrStaleClaim = errors.New("stale claim: the task moved on without this run")

// Claim identifies one run of a task: the attempt a worker claimed.
type Claim struct {
	ID          int64
	Attempt     int
	AttemptedAt time.Time
}

const jobDiscardIfClaimedSQL = `
UPDATE river_job
SET state = 'discarded',
    finalized_at = now(),
    errors = array_append(errors, $4::jsonb)
WHERE id = $1
  AND state = 'running'
  AND attempt = $2
  AND attempted_at = $3`

// JobDiscardIfClaimed fails a task permanently if the claim is still the
// current one, appending attemptError (a River AttemptError as JSON) to
// its errors. It reports whether the claim held; false means the result is
// stale and nothing changed.
func JobDiscardIfClaimed(ctx context.Context, q DBTX, c Claim, attemptError []byte) (bool, error) {
	tag, err := q.Exec(ctx, jobDiscardIfClaimedSQL, c.ID, c.Attempt, c.AttemptedAt, attemptError)
	if err != nil {
		return false, translate("discard task", err)
	}
	return tag.RowsAffected() == 1, nil
}

const jobCompleteIfClaimedSQL = `
UPDATE river_job
SET state = 'completed',
    finalized_at = now(),
    metadata = CASE WHEN $4::jsonb IS NULL THEN metadata ELSE jsonb_set(metadata, '{output}', $4::jsonb) END
WHERE id = $1
  AND state = 'running'
  AND attempt = $2
  AND attempted_at = $3`

// JobCompleteIfClaimed completes a task with output (nil for none) if the
// claim is still current, and reports whether it was.
func JobCompleteIfClaimed(ctx context.Context, q DBTX, c Claim, output []byte) (bool, error) {
	var out any
	if output != nil {
		out = string(output)
	}
	tag, err := q.Exec(ctx, jobCompleteIfClaimedSQL, c.ID, c.Attempt, c.AttemptedAt, out)
	if err != nil {
		return false, translate("complete task", err)
	}
	return tag.RowsAffected() == 1, nil
}

// A retry due within a second is made available at once, as River does
// for retries shorter than its scheduler's interval; a later one waits as
// retryable for River's scheduler.
const jobRetryIfClaimedSQL = `
UPDATE river_job
SET state = CASE WHEN $4::timestamptz <= now() + interval '1 second' THEN 'available'::river_job_state ELSE 'retryable'::river_job_state END,
    scheduled_at = $4,
    errors = array_append(errors, $5::jsonb)
WHERE id = $1
  AND state = 'running'
  AND attempt = $2
  AND attempted_at = $3`

// JobRetryIfClaimed schedules the task's next attempt at retryAt,
// appending attemptError, if the claim is still current.
func JobRetryIfClaimed(ctx context.Context, q DBTX, c Claim, retryAt time.Time, attemptError []byte) (bool, error) {
	tag, err := q.Exec(ctx, jobRetryIfClaimedSQL, c.ID, c.Attempt, c.AttemptedAt, retryAt, attemptError)
	if err != nil {
		return false, translate("retry task", err)
	}
	return tag.RowsAffected() == 1, nil
}
