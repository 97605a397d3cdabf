package db

import "context"

// Queries of switchyard_idempotency_key. A key names the task it created and
// is deleted with that task (ON DELETE CASCADE).

const idempotencyKeyTaskIDSQL = `
SELECT task_id FROM switchyard_idempotency_key WHERE key = $1`

// IdempotencyKeyTaskID returns the task created with key, or ErrNotFound.
func IdempotencyKeyTaskID(ctx context.Context, q DBTX, key string) (int64, error) {
	var id int64
	err := q.QueryRow(ctx, idempotencyKeyTaskIDSQL, key).Scan(&id)
	return id, translate("get idempotency key", err)
}

// The no-op DO UPDATE makes RETURNING yield the existing row on conflict;
// DO NOTHING would return no row. It waits for a concurrent transaction
// holding the same key to finish, which is what serialises racing inserts.
const idempotencyKeyInsertSQL = `
INSERT INTO switchyard_idempotency_key (key, task_id) VALUES ($1, $2)
ON CONFLICT (key) DO UPDATE SET key = EXCLUDED.key
RETURNING task_id`

// IdempotencyKeyInsert claims key for taskID and returns the task that owns
// the key: taskID when the claim won, another task's id when the key was
// already taken.
func IdempotencyKeyInsert(ctx context.Context, q DBTX, key string, taskID int64) (int64, error) {
	var owner int64
	err := q.QueryRow(ctx, idempotencyKeyInsertSQL, key, taskID).Scan(&owner)
	return owner, translate("insert idempotency key", err)
}
