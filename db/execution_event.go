package db

import (
	"context"
	"encoding/json"
	"time"
)

// Queries of switchyard_execution_event: the append-only history of
// executions.

// ExecutionEvent is one entry of an execution's history.
type ExecutionEvent struct {
	ID          int64
	ExecutionID int64
	At          time.Time
	Type        string
	StepKey     *string
	Data        json.RawMessage
}

const executionEventInsertSQL = `
INSERT INTO switchyard_execution_event (execution_id, type, step_key, data) VALUES ($1, $2, $3, $4)`

// ExecutionEventInsert appends an event.
func ExecutionEventInsert(ctx context.Context, q DBTX, executionID int64, typ string, stepKey *string, data json.RawMessage) error {
	_, err := q.Exec(ctx, executionEventInsertSQL, executionID, typ, stepKey, data)
	return translate("append execution event", err)
}

const executionEventListSQL = `
SELECT id, execution_id, at, type, step_key, data FROM switchyard_execution_event
WHERE execution_id = $1 AND id > $2 ORDER BY id LIMIT $3`

// ExecutionEventList returns an execution's events after afterID, oldest
// first.
func ExecutionEventList(ctx context.Context, q DBTX, executionID, afterID int64, limit int) ([]*ExecutionEvent, error) {
	rows, err := q.Query(ctx, executionEventListSQL, executionID, afterID, limit)
	if err != nil {
		return nil, translate("list execution events", err)
	}
	defer rows.Close()
	var out []*ExecutionEvent
	for rows.Next() {
		var e ExecutionEvent
		if err := rows.Scan(&e.ID, &e.ExecutionID, &e.At, &e.Type, &e.StepKey, &e.Data); err != nil {
			return nil, translate("scan execution event", err)
		}
		out = append(out, &e)
	}
	return out, translate("list execution events", rows.Err())
}
