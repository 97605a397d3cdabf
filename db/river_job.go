package db

import (
	"context"
	"time"
)

// Queries Switchyard runs on River's river_job table, beyond River's own
// client API. Every write is fenced on the claim: id, state 'running',
// attempt and attempted_at. The attempt alone is not enough because a
// snooze gives the next run the same attempt number.

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
