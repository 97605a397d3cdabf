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

// scanStep reads a step. The JSON columns are read as bytes: Postgres
// returns valid JSON, and scanning into json.RawMessage would validate it
// again on every read (the engine reads steps in every transaction).
func scanStep(row pgx.Row, extra ...any) (*Step, error) {
	var (
		s            Step
		spec, output []byte
	)
	dest := []any{&s.ExecutionID, &s.Key, &s.Position, &s.Kind, &s.Status, &s.DependsOn, &s.Optional, &spec,
		&s.TaskID, &s.ChildExecutionID, &s.Attempt, &output, &s.Error, &s.StartedAt, &s.FinishedAt}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return nil, err
	}
	s.Spec, s.Output = spec, output
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

// A dependency is done when it completed or was skipped, or failed or was
// cancelled while optional (the engine's depsDone).
const stepsForOutcomeSQL = `
SELECT ` + stepColumns + `,
       CASE WHEN s.key = ANY($2) THEN 0 ELSE (
           SELECT count(*) FROM switchyard_step d
           WHERE d.execution_id = s.execution_id AND d.key = ANY(s.depends_on)
             AND NOT (d.status IN ('completed', 'skipped') OR (d.optional AND d.status IN ('failed', 'cancelled')))
       ) END
FROM switchyard_step s
WHERE s.execution_id = $1 AND (s.key = ANY($2) OR (s.status = 'pending' AND s.depends_on && $2))
ORDER BY s.position`

// StepsForOutcome returns the steps keys of an execution and its pending
// steps that depend on any of them, in definition order, with the number
// of each one's dependencies that are not done (0 for the steps keys):
// what applying the outcomes of keys can change, without reading the
// other steps.
func StepsForOutcome(ctx context.Context, q DBTX, executionID int64, keys []string) ([]*Step, map[string]int, error) {
	rows, err := q.Query(ctx, stepsForOutcomeSQL, executionID, keys)
	if err != nil {
		return nil, nil, translate("list steps", err)
	}
	var (
		steps []*Step
		open  = map[string]int{}
	)
	err = scanStepsForOutcome(rows, &steps, open)
	return steps, open, translate("list steps", err)
}

// QueueStepsForOutcome queues StepsForOutcome; steps and open are filled
// when b is sent.
func QueueStepsForOutcome(b *Batch, executionID int64, keys []string, steps *[]*Step, open map[string]int) {
	b.b.Queue(stepsForOutcomeSQL, executionID, keys).Query(func(rows pgx.Rows) error {
		return translate("list steps", scanStepsForOutcome(rows, steps, open))
	})
}

func scanStepsForOutcome(rows pgx.Rows, steps *[]*Step, open map[string]int) error {
	defer rows.Close()
	for rows.Next() {
		var n int
		s, err := scanStep(rows, &n)
		if err != nil {
			return err
		}
		*steps = append(*steps, s)
		open[s.Key] = n
	}
	return rows.Err()
}

// QueueStepList queues StepList; steps is filled when b is sent.
func QueueStepList(b *Batch, executionID int64, steps *[]*Step) {
	b.b.Queue(stepListSQL, executionID).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			s, err := scanStep(rows)
			if err != nil {
				return translate("scan step", err)
			}
			*steps = append(*steps, s)
		}
		return translate("list steps", rows.Err())
	})
}

// Multi-row writes of switchyard_step lock their rows in (execution_id,
// key) order first, so two of them (this one and StepMarkStartedMany)
// cannot deadlock on each other's rows.
const stepUpdateManySQL = `
WITH u AS (
    SELECT * FROM unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::int[], $7::jsonb[], $8::text[],
                         $9::timestamptz[], $10::timestamptz[])
        AS u(key, status, task_id, child_execution_id, attempt, output, error, started_at, finished_at)
), locked AS (
    SELECT s.key FROM switchyard_step s JOIN u ON s.key = u.key
    WHERE s.execution_id = $1
    ORDER BY s.key
    FOR NO KEY UPDATE OF s
)
UPDATE switchyard_step s
SET status = u.status, task_id = u.task_id, child_execution_id = u.child_execution_id, attempt = u.attempt,
    output = u.output, error = u.error, started_at = u.started_at, finished_at = u.finished_at
FROM u JOIN locked l ON l.key = u.key
WHERE s.execution_id = $1 AND s.key = u.key`

// StepUpdateMany writes the mutable columns of steps of one execution in
// one statement.
func StepUpdateMany(ctx context.Context, q DBTX, executionID int64, steps []*Step) error {
	if len(steps) == 0 {
		return nil
	}
	sql, args := stepUpdateMany(executionID, steps)
	_, err := q.Exec(ctx, sql, args...)
	return translate("update steps", err)
}

// QueueStepUpdateMany queues StepUpdateMany (nothing for no steps).
func QueueStepUpdateMany(b *Batch, executionID int64, steps []*Step) {
	if len(steps) > 0 {
		sql, args := stepUpdateMany(executionID, steps)
		b.b.Queue(sql, args...)
	}
}

func stepUpdateMany(executionID int64, steps []*Step) (string, []any) {
	if len(steps) == 1 {
		s := steps[0]
		return stepUpdateSQL, []any{s.ExecutionID, s.Key, s.Status, s.TaskID, s.ChildExecutionID, s.Attempt,
			s.Output, s.Error, s.StartedAt, s.FinishedAt}
	}
	n := len(steps)
	var (
		keys, statuses, errs  = make([]string, n), make([]string, n), make([]*string, n)
		taskIDs, childIDs     = make([]*int64, n), make([]*int64, n)
		attempts              = make([]int32, n)
		outputs               = make([][]byte, n)
		startedAt, finishedAt = make([]*time.Time, n), make([]*time.Time, n)
	)
	for i, s := range steps {
		keys[i], statuses[i], errs[i] = s.Key, s.Status, s.Error
		taskIDs[i], childIDs[i], attempts[i] = s.TaskID, s.ChildExecutionID, int32(s.Attempt)
		if s.Output != nil {
			outputs[i] = s.Output
		}
		startedAt[i], finishedAt[i] = s.StartedAt, s.FinishedAt
	}
	return stepUpdateManySQL, []any{executionID, keys, statuses, taskIDs, childIDs, attempts, outputs, errs, startedAt, finishedAt}
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

// StepStart is one step start of StepMarkStartedMany.
type StepStart struct {
	ExecutionID int64
	Key         string
	TaskID      int64
	Attempt     int
}

const stepMarkStartedManySQL = `
WITH v AS (
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::int[]) AS v(execution_id, key, task_id, attempt)
), locked AS (
    SELECT s.execution_id, s.key, v.task_id, v.attempt
    FROM switchyard_step s JOIN v ON s.execution_id = v.execution_id AND s.key = v.key
    WHERE s.task_id = v.task_id AND s.status IN ('ready', 'running')
    ORDER BY s.execution_id, s.key
    FOR NO KEY UPDATE OF s
), s AS (
    UPDATE switchyard_step s
    SET status = 'running', attempt = l.attempt, started_at = coalesce(s.started_at, now())
    FROM locked l
    WHERE s.execution_id = l.execution_id AND s.key = l.key
    RETURNING s.execution_id, s.key, l.task_id, l.attempt
)
INSERT INTO switchyard_execution_event (execution_id, type, step_key, data)
SELECT execution_id, 'step_started', key, jsonb_build_object('task_id', task_id, 'attempt', attempt) FROM s
ORDER BY execution_id, key`

// StepMarkStartedMany is StepMarkStarted for many steps (of any
// executions) in one statement: one commit, and one notification of the
// history's trigger, for all of them.
func StepMarkStartedMany(ctx context.Context, q DBTX, starts []StepStart) error {
	switch len(starts) {
	case 0:
		return nil
	case 1:
		s := starts[0]
		return StepMarkStarted(ctx, q, s.ExecutionID, s.Key, s.TaskID, s.Attempt)
	}
	execs, keys, tasks, attempts := make([]int64, len(starts)), make([]string, len(starts)), make([]int64, len(starts)), make([]int32, len(starts))
	for i, s := range starts {
		execs[i], keys[i], tasks[i], attempts[i] = s.ExecutionID, s.Key, s.TaskID, int32(s.Attempt)
	}
	_, err := q.Exec(ctx, stepMarkStartedManySQL, execs, keys, tasks, attempts)
	return translate("mark steps started", err)
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
