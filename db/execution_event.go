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

// EventInsert is one event of ExecutionEventInsertMany.
type EventInsert struct {
	Type    string
	StepKey *string
	Data    json.RawMessage
}

const executionEventInsertManySQL = `
INSERT INTO switchyard_execution_event (execution_id, type, step_key, data)
SELECT $1, e.type, e.step_key, e.data
FROM unnest($2::text[], $3::text[], $4::jsonb[]) WITH ORDINALITY AS e(type, step_key, data, n)
ORDER BY e.n`

// ExecutionEventInsertMany appends events in order, in one statement.
func ExecutionEventInsertMany(ctx context.Context, q DBTX, executionID int64, events []EventInsert) error {
	if len(events) == 0 {
		return nil
	}
	sql, args := executionEventInsertMany(executionID, events)
	_, err := q.Exec(ctx, sql, args...)
	return translate("append execution events", err)
}

// QueueExecutionEventInsertMany queues ExecutionEventInsertMany (nothing
// for no events).
func QueueExecutionEventInsertMany(b *Batch, executionID int64, events []EventInsert) {
	if len(events) > 0 {
		sql, args := executionEventInsertMany(executionID, events)
		b.b.Queue(sql, args...)
	}
}

func executionEventInsertMany(executionID int64, events []EventInsert) (string, []any) {
	if len(events) == 1 {
		return executionEventInsertSQL, []any{executionID, events[0].Type, events[0].StepKey, events[0].Data}
	}
	types, keys, data := make([]string, len(events)), make([]*string, len(events)), make([][]byte, len(events))
	for i, ev := range events {
		types[i], keys[i] = ev.Type, ev.StepKey
		if ev.Data != nil {
			data[i] = ev.Data
		}
	}
	return executionEventInsertManySQL, []any{executionID, types, keys, data}
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
