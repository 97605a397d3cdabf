package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Querier is the one method QueueStats needs. It is narrower than DBTX
// because a read needs nothing more, which keeps a caller's adapter small;
// *pgxpool.Pool, *pgx.Conn, pgx.Tx and any DBTX satisfy it.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// QueueStat is the depth and oldest-task age of one queue in one state.
// State uses Switchyard's state names (queued, scheduled, in_progress,
// retrying, waiting), never River's.
type QueueStat struct {
	Queue string
	State string
	// Count is the number of tasks in Queue and State.
	Count int64
	// OldestAge is the age of the oldest of them: since it became runnable
	// (scheduled_at) for queued, since its attempt started (attempted_at)
	// for in_progress, and since it was created for the other states.
	OldestAge time.Duration
}

// queueStatsSQL counts the non-final tasks per queue and River state and
// measures the oldest in each group.
//
// Only non-final states are read: completed, discarded and cancelled rows
// are the whole task history and grow without bound, while this runs on
// every metrics scrape. The state filter is the leading column of
// river_job_prioritized_fetching_index (state, queue, priority,
// scheduled_at, id), so the planner can visit only the live rows; the age
// columns other than scheduled_at are not in the index, so those rows are
// read from the heap, which is cheap because live rows are few.
//
// The age is computed in the database from its own now() so it is not
// skewed by the difference between the database's and this host's clocks;
// it is clamped at zero because an available row's scheduled_at may lie a
// little in the future.
const queueStatsSQL = `
SELECT queue,
       state::text,
       count(*),
       greatest(0, extract(epoch FROM now() - min(
           CASE state
               WHEN 'available' THEN scheduled_at
               WHEN 'running'   THEN coalesce(attempted_at, created_at)
               ELSE created_at
           END)))::float8
FROM river_job
WHERE state IN ('available', 'scheduled', 'running', 'retryable', 'pending')
GROUP BY queue, state
ORDER BY queue, state`

// queueStatStateNames maps the River states queueStatsSQL reads to
// Switchyard's names, which are the only ones users see (see jobs.State).
var queueStatStateNames = map[string]string{
	"available": "queued",
	"scheduled": "scheduled",
	"running":   "in_progress",
	"retryable": "retrying",
	"pending":   "waiting",
}

// QueueStats reads the depth and oldest-task age of every queue in every
// non-final state, in one grouped query. q may be the pool or a
// transaction. Queues with no live tasks have no rows; the caller decides
// whether to report them as zero.
func QueueStats(ctx context.Context, q Querier) ([]QueueStat, error) {
	rows, err := q.Query(ctx, queueStatsSQL)
	if err != nil {
		return nil, translate("query queue stats", err)
	}
	defer rows.Close()

	var stats []QueueStat
	for rows.Next() {
		var (
			s          QueueStat
			riverState string
			ageSeconds float64
		)
		if err := rows.Scan(&s.Queue, &riverState, &s.Count, &ageSeconds); err != nil {
			return nil, translate("scan queue stats", err)
		}
		s.State = riverState
		if name, ok := queueStatStateNames[riverState]; ok {
			s.State = name
		}
		s.OldestAge = time.Duration(ageSeconds * float64(time.Second))
		stats = append(stats, s)
	}
	if err := rows.Err(); err != nil {
		return nil, translate("read queue stats", err)
	}
	return stats, nil
}
