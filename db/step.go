package db

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
)

// Queries of switchyard_step: the steps of workflow executions. Writes
// happen under the execution's row lock (ExecutionGetForUpdate), except
// StepMarkStarted, which only moves a step from ready to running.

// Step is a row of switchyard_step.
type Step struct {
	ExecutionID      int64
	Key              string
	Position         int
	Kind             string
	Status           string
	DependsOn        []string
	Optional         bool
	Spec             json.RawMessage
	TaskID           *int64
	ChildExecutionID *int64
	Attempt          int
	Output           json.RawMessage
	Error            *string
	StartedAt        *time.Time
	FinishedAt       *time.Time
}

const stepColumns = `execution_id, key, position, kind, status, depends_on, optional, spec, task_id,
	child_execution_id, attempt, output, error, started_at, finished_at`

func scanStep(row pgx.Row) (*Step, error) {
	var s Step
	err := row.Scan(&s.ExecutionID, &s.Key, &s.Position, &s.Kind, &s.Status, &s.DependsOn, &s.Optional, &s.Spec,
		&s.TaskID, &s.ChildExecutionID, &s.Attempt, &s.Output, &s.Error, &s.StartedAt, &s.FinishedAt)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// StepInsertMany inserts the steps of a new execution with COPY.
func StepInsertMany(ctx context.Context, tx pgx.Tx, steps []*Step) error {
	rows := make([][]any, len(steps))
	for i, s := range steps {
		rows[i] = []any{s.ExecutionID, s.Key, s.Position, s.Kind, s.Status, s.DependsOn, s.Optional, s.Spec}
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"switchyard_step"},
		[]string{"execution_id", "key", "position", "kind", "status", "depends_on", "optional", "spec"},
		pgx.CopyFromRows(rows))
	return translate("insert steps", err)
}

const stepListSQL = `SELECT ` + stepColumns + ` FROM switchyard_step WHERE execution_id = $1 ORDER BY position`

// StepList returns an execution's steps in definition order.
func StepList(ctx context.Context, q DBTX, executionID int64) ([]*Step, error) {
	rows, err := q.Query(ctx, stepListSQL, executionID)
	if err != nil {
		return nil, translate("list steps", err)
	}
	defer rows.Close()
	var out []*Step
	for rows.Next() {
		s, err := scanStep(rows)
		if err != nil {
			return nil, translate("scan step", err)
		}
		out = append(out, s)
	}
	return out, translate("list steps", rows.Err())
}

const stepUpdateSQL = `
UPDATE switchyard_step
SET status = $3, task_id = $4, child_execution_id = $5, attempt = $6, output = $7, error = $8,
    started_at = $9, finished_at = $10
WHERE execution_id = $1 AND key = $2`

// StepUpdate writes a step's mutable columns.
func StepUpdate(ctx context.Context, q DBTX, s *Step) error {
	_, err := q.Exec(ctx, stepUpdateSQL, s.ExecutionID, s.Key, s.Status, s.TaskID, s.ChildExecutionID, s.Attempt,
		s.Output, s.Error, s.StartedAt, s.FinishedAt)
	return translate("update step", err)
}

// The event is appended in the same statement, and only when the step
// moved (a retried attempt of a running step records its attempt).
const stepMarkStartedSQL = `
WITH s AS (
    UPDATE switchyard_step
    SET status = 'running', attempt = $4, started_at = coalesce(started_at, now())
    WHERE execution_id = $1 AND key = $2 AND task_id = $3 AND status IN ('ready', 'running')
    RETURNING execution_id, key
)
INSERT INTO switchyard_execution_event (execution_id, type, step_key, data)
SELECT execution_id, 'step_started', key, jsonb_build_object('task_id', $3::bigint, 'attempt', $4::int) FROM s`

// StepMarkStarted records that a handler of the step's task began attempt
// number attempt. It needs no execution lock: it only moves the step from
// ready to running, which no other transition depends on.
func StepMarkStarted(ctx context.Context, q DBTX, executionID int64, key string, taskID int64, attempt int) error {
	_, err := q.Exec(ctx, stepMarkStartedSQL, executionID, key, taskID, attempt)
	return translate("mark step started", err)
}

const stepOutputsSQL = `
SELECT key, output FROM switchyard_step
WHERE execution_id = $1 AND status = 'completed' AND output IS NOT NULL`

// StepOutputs returns the outputs of an execution's completed steps.
func StepOutputs(ctx context.Context, q DBTX, executionID int64) (map[string]json.RawMessage, error) {
	rows, err := q.Query(ctx, stepOutputsSQL, executionID)
	if err != nil {
		return nil, translate("read step outputs", err)
	}
	defer rows.Close()
	out := map[string]json.RawMessage{}
	for rows.Next() {
		var (
			key    string
			output json.RawMessage
		)
		if err := rows.Scan(&key, &output); err != nil {
			return nil, translate("scan step output", err)
		}
		out[key] = output
	}
	return out, translate("read step outputs", rows.Err())
}
