package db

import (
	"context"
	"encoding/json"
)

// Queries of switchyard_signal: signals sent to executions, kept until a
// wait step consumes them.

const signalInsertSQL = `
INSERT INTO switchyard_signal (execution_id, name, payload, idempotency_key) VALUES ($1, $2, $3, $4)
ON CONFLICT (execution_id, idempotency_key) DO NOTHING
RETURNING id`

// SignalInsert stores a signal and returns its id; a repeated idempotency
// key for the execution stores nothing and returns ErrConflict.
func SignalInsert(ctx context.Context, q DBTX, executionID int64, name string, payload json.RawMessage, key *string) (int64, error) {
	var id int64
	err := q.QueryRow(ctx, signalInsertSQL, executionID, name, payload, key).Scan(&id)
	if isNoRows(err) {
		return 0, translate("insert signal", ErrConflict)
	}
	return id, translate("insert signal", err)
}

const signalConsumeSQL = `
UPDATE switchyard_signal SET consumed_by = $3
WHERE id = (SELECT id FROM switchyard_signal
            WHERE execution_id = $1 AND name = $2 AND consumed_by IS NULL
            ORDER BY id LIMIT 1)
RETURNING payload`

// SignalConsume marks the oldest unconsumed signal called name as consumed
// by stepKey and returns its payload, or ErrNotFound when there is none.
func SignalConsume(ctx context.Context, q DBTX, executionID int64, name, stepKey string) (json.RawMessage, error) {
	var payload json.RawMessage
	err := q.QueryRow(ctx, signalConsumeSQL, executionID, name, stepKey).Scan(&payload)
	return payload, translate("consume signal", err)
}
