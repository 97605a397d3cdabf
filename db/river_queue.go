package db

import "context"

// Queries Switchyard runs on River's river_queue table. River creates a
// queue's row when a pod first works the queue; pausing needs the row.

const riverQueueEnsureSQL = `
INSERT INTO river_queue (name, created_at, metadata, updated_at)
VALUES ($1, now(), '{}', now())
ON CONFLICT (name) DO NOTHING`

// RiverQueueEnsure creates the queue's row if no pod has created it yet, so
// a queue can be paused before any worker serves it.
func RiverQueueEnsure(ctx context.Context, q DBTX, name string) error {
	_, err := q.Exec(ctx, riverQueueEnsureSQL, name)
	return translate("ensure queue", err)
}
