package db

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
)

// Queries of switchyard_execution: workflow executions.

// Execution is a row of switchyard_execution.
type Execution struct {
	ID                int64
	Name              string
	Status            string
	Definition        json.RawMessage
	Input             json.RawMessage
	IdempotencyKey    *string
	ParentExecutionID *int64
	ParentStepKey     *string
	TimeoutMS         *int64
	TimeoutTaskID     *int64
	StepsTotal        int
	StepsFinal        int
	Error             *string
	CreatedAt         time.Time
	FinishedAt        *time.Time
}

const executionColumns = `id, name, status, definition, input, idempotency_key, parent_execution_id, parent_step_key,
	timeout_ms, timeout_task_id, steps_total, steps_final, error, created_at, finished_at`

// scanExecution reads an execution; the JSON columns as bytes (see
// scanStep).
func scanExecution(row pgx.Row) (*Execution, error) {
	var (
		e                 Execution
		definition, input []byte
	)
	err := row.Scan(&e.ID, &e.Name, &e.Status, &definition, &input, &e.IdempotencyKey, &e.ParentExecutionID,
		&e.ParentStepKey, &e.TimeoutMS, &e.TimeoutTaskID, &e.StepsTotal, &e.StepsFinal, &e.Error, &e.CreatedAt, &e.FinishedAt)
	if err != nil {
		return nil, err
	}
	e.Definition, e.Input = definition, input
	return &e, nil
}

const executionInsertSQL = `
INSERT INTO switchyard_execution (name, status, definition, input, idempotency_key, parent_execution_id, parent_step_key, timeout_ms, steps_total)
VALUES ($1, 'running', $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING ` + executionColumns

// ExecutionInsert inserts a running execution. With an idempotency key
// that exists it inserts nothing and returns ErrConflict; it waits for a
// concurrent insert of the same key to finish first.
func ExecutionInsert(ctx context.Context, q DBTX, e *Execution) (*Execution, error) {
	out, err := scanExecution(q.QueryRow(ctx, executionInsertSQL, e.Name, e.Definition, e.Input, e.IdempotencyKey,
		e.ParentExecutionID, e.ParentStepKey, e.TimeoutMS, e.StepsTotal))
	if isNoRows(err) {
		return nil, translate("insert execution", ErrConflict)
	}
	return out, translate("insert execution", err)
}

const executionGetSQL = `SELECT ` + executionColumns + ` FROM switchyard_execution WHERE id = $1`

// ExecutionGet returns an execution, or ErrNotFound.
func ExecutionGet(ctx context.Context, q DBTX, id int64) (*Execution, error) {
	e, err := scanExecution(q.QueryRow(ctx, executionGetSQL, id))
	return e, translate("get execution", err)
}

// ExecutionGetForUpdate returns an execution and locks its row until the
// transaction ends: every change to an execution and its steps happens
// under this lock, which serialises the advancement of one execution
// across pods.
//
// The lock is FOR NO KEY UPDATE, which two engine transactions cannot
// both hold but which lets foreign-key checks through (FOR KEY SHARE): a
// step's start appends to the history (StepMarkStarted) without the lock,
// and with FOR UPDATE that insert's check of its execution_id would wait
// for the execution's transaction in flight. An execution's id never
// changes, which is what FOR UPDATE would guard in addition.
func ExecutionGetForUpdate(ctx context.Context, tx pgx.Tx, id int64) (*Execution, error) {
	e, err := scanExecution(tx.QueryRow(ctx, executionGetSQL+` FOR NO KEY UPDATE`, id))
	return e, translate("lock execution", err)
}

// The definition and the input are left out: a change to an execution
// needs neither, and the definition of a large workflow is the bulk of the
// row.
const executionLockSQL = `SELECT ` + executionLockColumns + ` FROM switchyard_execution WHERE id = $1 FOR NO KEY UPDATE`

const executionLockColumns = `id, name, status, NULL::jsonb, NULL::jsonb, idempotency_key, parent_execution_id, parent_step_key,
	timeout_ms, timeout_task_id, steps_total, steps_final, error, created_at, finished_at`

// ExecutionLock is ExecutionGetForUpdate (the same lock) without the
// definition and the input (both nil).
func ExecutionLock(ctx context.Context, tx pgx.Tx, id int64) (*Execution, error) {
	e, err := scanExecution(tx.QueryRow(ctx, executionLockSQL, id))
	return e, translate("lock execution", err)
}

// QueueExecutionLock queues ExecutionLock; *out is set when b is sent
// (ErrNotFound if there is no such execution).
func QueueExecutionLock(b *Batch, id int64, out **Execution) {
	b.b.Queue(executionLockSQL, id).QueryRow(func(row pgx.Row) error {
		e, err := scanExecution(row)
		if err != nil {
			return translate("lock execution", err)
		}
		*out = e
		return nil
	})
}

// QueueExecutionUpdate queues ExecutionUpdate.
func QueueExecutionUpdate(b *Batch, e *Execution) {
	b.b.Queue(executionUpdateSQL, e.ID, e.Status, e.Error, e.StepsFinal, e.TimeoutTaskID)
}

const executionGetByKeySQL = `SELECT ` + executionColumns + ` FROM switchyard_execution WHERE idempotency_key = $1`

// ExecutionGetByIdempotencyKey returns the execution started with key, or
// ErrNotFound.
func ExecutionGetByIdempotencyKey(ctx context.Context, q DBTX, key string) (*Execution, error) {
	e, err := scanExecution(q.QueryRow(ctx, executionGetByKeySQL, key))
	return e, translate("get execution by idempotency key", err)
}

const executionUpdateSQL = `
UPDATE switchyard_execution
SET status = $2, error = $3, steps_final = $4, timeout_task_id = $5,
    finished_at = CASE WHEN $2 IN ('completed', 'failed', 'cancelled', 'timed_out') THEN coalesce(finished_at, now()) ELSE NULL END
WHERE id = $1`

// ExecutionUpdate writes an execution's mutable columns, stamping
// finished_at when the status is final.
func ExecutionUpdate(ctx context.Context, q DBTX, e *Execution) error {
	_, err := q.Exec(ctx, executionUpdateSQL, e.ID, e.Status, e.Error, e.StepsFinal, e.TimeoutTaskID)
	return translate("update execution", err)
}

// ExecutionListParams filters ExecutionList.
type ExecutionListParams struct {
	Statuses []string
	Name     string
	AfterID  int64 // cursor: executions with a smaller id (newest first)
	Limit    int
}

const executionListSQL = `
SELECT ` + executionColumns + ` FROM switchyard_execution
WHERE (cardinality($1::text[]) = 0 OR status = ANY($1))
  AND ($2 = '' OR name = $2)
  AND ($3 = 0 OR id < $3)
ORDER BY id DESC
LIMIT $4`

// ExecutionList returns executions, newest first.
func ExecutionList(ctx context.Context, q DBTX, p ExecutionListParams) ([]*Execution, error) {
	if p.Statuses == nil {
		p.Statuses = []string{}
	}
	rows, err := q.Query(ctx, executionListSQL, p.Statuses, p.Name, p.AfterID, p.Limit)
	if err != nil {
		return nil, translate("list executions", err)
	}
	defer rows.Close()
	var out []*Execution
	for rows.Next() {
		e, err := scanExecution(rows)
		if err != nil {
			return nil, translate("scan execution", err)
		}
		out = append(out, e)
	}
	return out, translate("list executions", rows.Err())
}

const executionChildrenSQL = `
SELECT id FROM switchyard_execution
WHERE parent_execution_id = $1 AND status IN ('pending', 'running', 'paused')`

// ExecutionActiveChildren returns the ids of an execution's unfinished
// child executions.
func ExecutionActiveChildren(ctx context.Context, q DBTX, id int64) ([]int64, error) {
	rows, err := q.Query(ctx, executionChildrenSQL, id)
	if err != nil {
		return nil, translate("list child executions", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	return ids, translate("list child executions", err)
}
