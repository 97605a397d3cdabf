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

const jobLockIfClaimedSQL = `
SELECT true FROM river_job
WHERE id = $1
  AND state = 'running'
  AND attempt = $2
  AND attempted_at = $3
FOR UPDATE`

// JobLockIfClaimed locks the task's row (until the end of the caller's
// transaction) if the claim is still current, and reports whether it was.
// It changes nothing: for an outcome that River writes itself (a retry),
// the caller checks the claim and leaves the transition to River.
func JobLockIfClaimed(ctx context.Context, q DBTX, c Claim) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, jobLockIfClaimedSQL, c.ID, c.Attempt, c.AttemptedAt).Scan(&ok)
	if isNoRows(err) {
		return false, nil
	}
	if err != nil {
		return false, translate("lock task", err)
	}
	return ok, nil
}

// RescuedJob is a task the rescuer returned to the queue (or failed).
type RescuedJob struct {
	Claim
	Kind     string
	Queue    string
	State    string // available or discarded
	Pod      string // the pod that had claimed it
	Metadata []byte
}

// The claimer is the last entry of attempted_by (River appends the client
// id at each claim). A claim is abandoned when its pod has no heartbeat
// newer than staleAfter — the row is stale, or gone without the pod having
// returned its tasks — and the claim itself is older than staleAfter (a
// pod registers before it claims, so a fresh claim always has a live row).
// The update is fenced on the claim, so a task that moved on meanwhile
// (completed, or claimed again) is never touched. Tasks out of attempts are
// discarded, except workflow tasks (see JobRescueAbandoned).
const jobRescueAbandonedSQL = `
WITH abandoned AS (
    SELECT j.id, j.attempt, j.attempted_at, j.attempted_by[array_length(j.attempted_by, 1)] AS pod,
           j.attempt >= j.max_attempts AS exhausted
    FROM river_job j
    WHERE j.state = 'running'
      AND j.attempted_at < now() - make_interval(secs => $1::float8)
      AND NOT EXISTS (
          SELECT 1 FROM switchyard_pod p
          WHERE p.id = j.attempted_by[array_length(j.attempted_by, 1)]
            AND p.heartbeat_at >= now() - make_interval(secs => $1::float8))
    ORDER BY j.id
    LIMIT $2
    FOR UPDATE OF j SKIP LOCKED
)
UPDATE river_job j
SET state = CASE WHEN a.exhausted AND NOT (j.metadata->'switchyard' ? 'workflow') THEN 'discarded'::river_job_state
                 ELSE 'available'::river_job_state END,
    finalized_at = CASE WHEN a.exhausted AND NOT (j.metadata->'switchyard' ? 'workflow') THEN now() END,
    scheduled_at = now(),
    errors = array_append(j.errors, jsonb_build_object(
        'at', now(), 'attempt', a.attempt,
        'error', 'rescued: pod ' || coalesce(a.pod, '?') || ' stopped heartbeating while running this attempt'))
FROM abandoned a
WHERE j.id = a.id AND j.state = 'running' AND j.attempt = a.attempt AND j.attempted_at = a.attempted_at
RETURNING j.id, j.attempt, a.attempted_at, j.kind, j.queue, j.state::text, coalesce(a.pod, ''), j.metadata`

// JobRescueAbandoned returns up to limit abandoned in-progress tasks to the
// queue and reports them. Workflow tasks are always made available, even
// when out of attempts: they run once more, so their outcome goes through
// the workflow engine, which must record a step's failure; discarding them
// here would leave their step running forever.
func JobRescueAbandoned(ctx context.Context, q DBTX, staleAfter time.Duration, limit int) ([]RescuedJob, error) {
	rows, err := q.Query(ctx, jobRescueAbandonedSQL, staleAfter.Seconds(), limit)
	if err != nil {
		return nil, translate("rescue abandoned tasks", err)
	}
	defer rows.Close()
	var out []RescuedJob
	for rows.Next() {
		var r RescuedJob
		if err := rows.Scan(&r.ID, &r.Attempt, &r.AttemptedAt, &r.Kind, &r.Queue, &r.State, &r.Pod, &r.Metadata); err != nil {
			return nil, translate("scan rescued task", err)
		}
		out = append(out, r)
	}
	return out, translate("rescue abandoned tasks", rows.Err())
}
