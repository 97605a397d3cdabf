package db

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Queries of switchyard_pod, the registry of worker pods. Each pod upserts
// its row on every heartbeat and deletes it on clean shutdown; a row whose
// heartbeat_at has gone stale belongs to a pod that died.

// Pod is one worker pod as registered in switchyard_pod.
type Pod struct {
	// ID is the pod's River client ID (the name River records in
	// river_job.attempted_by); unique among running pods.
	ID string
	// Host is the pod's hostname.
	Host string
	// PID is the pod's process id on Host.
	PID int
	// Version is the pod's build version.
	Version string
	// Queues are the queues the pod works, as of its last heartbeat.
	Queues []PodQueue
	// StartedAt is when the pod's service started, by the pod's clock. It
	// is written when the row is created and kept by later upserts.
	StartedAt time.Time
	// HeartbeatAt is the database's time of the last heartbeat. PodUpsert
	// ignores it: the database sets it, so pod clocks do not matter.
	HeartbeatAt time.Time
}

// PodQueue is one queue of a pod: its executor size and how many of its
// executors were running a handler at the heartbeat.
type PodQueue struct {
	Name         string `json:"name"`
	ExecutorSize int    `json:"executor_size"`
	Busy         int    `json:"busy"`
}

// started_at is left out of DO UPDATE: a pod's start time is the one it
// registered with, and a heartbeat only refreshes what changes.
const podUpsertSQL = `
INSERT INTO switchyard_pod (id, host, pid, version, queues, started_at, heartbeat_at)
VALUES ($1, $2, $3, $4, $5, $6, now())
ON CONFLICT (id) DO UPDATE
SET host = EXCLUDED.host,
    pid = EXCLUDED.pid,
    version = EXCLUDED.version,
    queues = EXCLUDED.queues,
    heartbeat_at = now()`

// PodUpsert registers p or records a heartbeat for it: heartbeat_at becomes
// the database's now(), and every other column takes p's value except
// started_at, which keeps the value of the first upsert. p.HeartbeatAt is
// ignored.
func PodUpsert(ctx context.Context, q DBTX, p Pod) error {
	queues := p.Queues
	if queues == nil {
		queues = []PodQueue{} // the column holds an array, never null
	}
	queuesJSON, err := json.Marshal(queues)
	if err != nil {
		return fmt.Errorf("upsert pod: encode queues: %w", err)
	}
	_, err = q.Exec(ctx, podUpsertSQL, p.ID, p.Host, p.PID, p.Version, queuesJSON, p.StartedAt)
	return translate("upsert pod", err)
}

const podDeleteSQL = `DELETE FROM switchyard_pod WHERE id = $1`

// PodDelete deregisters the pod id. Deleting a pod that is not registered
// is not an error: deregistration may run more than once on shutdown, or
// after the row was cleaned up.
func PodDelete(ctx context.Context, q DBTX, id string) error {
	_, err := q.Exec(ctx, podDeleteSQL, id)
	return translate("delete pod", err)
}

// The cutoff is computed from the database's now(), like heartbeat_at
// itself, and is a range on switchyard_pod_heartbeat_at_idx. The duration
// travels as microseconds, Postgres's interval resolution.
const podListAliveSQL = `
SELECT id, host, pid, version, queues, started_at, heartbeat_at
FROM switchyard_pod
WHERE heartbeat_at > now() - $1::bigint * interval '1 microsecond'
ORDER BY id`

// PodListAlive returns the pods whose last heartbeat is more recent than
// staleAfter ago, ordered by id. staleAfter should be a few heartbeat
// intervals, so one late heartbeat does not hide a live pod. q may be the
// pool or a transaction (any Querier). The result is nil when no pod is
// alive.
func PodListAlive(ctx context.Context, q Querier, staleAfter time.Duration) ([]Pod, error) {
	rows, err := q.Query(ctx, podListAliveSQL, staleAfter.Microseconds())
	if err != nil {
		return nil, translate("list pods", err)
	}
	defer rows.Close()

	var pods []Pod
	for rows.Next() {
		var (
			p          Pod
			queuesJSON []byte
		)
		if err := rows.Scan(&p.ID, &p.Host, &p.PID, &p.Version, &queuesJSON, &p.StartedAt, &p.HeartbeatAt); err != nil {
			return nil, translate("scan pod", err)
		}
		if err := json.Unmarshal(queuesJSON, &p.Queues); err != nil {
			return nil, fmt.Errorf("list pods: decode queues of pod %s: %w", p.ID, err)
		}
		pods = append(pods, p)
	}
	if err := rows.Err(); err != nil {
		return nil, translate("read pods", err)
	}
	return pods, nil
}
