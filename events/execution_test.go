package events_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/dbtest"
	"github.com/switchyard/switchyard/events"
	"github.com/switchyard/switchyard/jobs"
)

// insertExecution inserts a bare execution row with raw SQL and returns its
// ID: the history's foreign key needs one.
func insertExecution(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var id int64
	err := pool.QueryRow(t.Context(),
		`INSERT INTO switchyard_execution (name, status, definition, steps_total) VALUES ('probe', 'running', '{}', 1) RETURNING id`).Scan(&id)
	if err != nil {
		t.Fatalf("insert execution: %v", err)
	}
	return id
}

// appendEvent appends one history entry (step nil for none) and returns it
// as the database stored it.
func appendEvent(t *testing.T, pool *pgxpool.Pool, executionID int64, typ string, step *string) events.ExecutionEvent {
	t.Helper()
	e := events.ExecutionEvent{ExecutionID: executionID, Type: typ}
	if step != nil {
		e.Step = *step
	}
	err := pool.QueryRow(t.Context(),
		`INSERT INTO switchyard_execution_event (execution_id, type, step_key, data) VALUES ($1, $2, $3, '{"n":1}') RETURNING id, at`,
		executionID, typ, step).Scan(&e.ID, &e.At)
	if err != nil {
		t.Fatalf("append execution event: %v", err)
	}
	return e
}

// assertExecution fails unless b lists exactly want.
func assertExecution(t *testing.T, b events.Batch, want events.ExecutionEvent) {
	t.Helper()
	if len(b.Executions) != 1 || len(b.Events) != 0 || b.Truncated != 0 || b.Resync {
		t.Fatalf("batch = %+v, want exactly one execution event", b)
	}
	got := b.Executions[0]
	if got.ID != want.ID || got.ExecutionID != want.ExecutionID || got.Type != want.Type || got.Step != want.Step || !got.At.Equal(want.At) {
		t.Fatalf("execution event = %+v, want %+v", got, want)
	}
}

func ptr[T any](v T) *T { return &v }

func TestExecutionEvents(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	b := startBroker(t, pool, events.Config{})
	ch := subscribe(t, b)
	execID := insertExecution(t, pool)

	before := time.Now()
	completed := appendEvent(t, pool, execID, "step_completed", ptr("a"))
	assertExecution(t, next(t, ch), completed)
	if at := completed.At; at.Before(before.Add(-time.Minute)) || at.After(time.Now().Add(time.Minute)) {
		t.Errorf("event At = %v, want about now (%v)", at, before)
	}

	// An event of the whole execution has no step.
	whole := appendEvent(t, pool, execID, "execution_completed", nil)
	assertExecution(t, next(t, ch), whole)

	// Nothing is sent for an INSERT ... SELECT that appends nothing (the
	// engine's conditional appends), nor for a rolled-back one. Shown by
	// the next batch being the next append, as notifications arrive in
	// commit order.
	exec(t, pool, `INSERT INTO switchyard_execution_event (execution_id, type) SELECT $1, 'never' WHERE false`, execID)
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `INSERT INTO switchyard_execution_event (execution_id, type) VALUES ($1, 'rolled_back')`, execID); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Keys that need escaping survive the round trip.
	odd := appendEvent(t, pool, execID, `type "quoted" é`, ptr("step\n\"b\"\\"))
	assertExecution(t, next(t, ch), odd)
	assertEmpty(t, ch)
}

// TestExecutionEventsOneBatchPerStatement: the rows one statement appends
// arrive as one batch, oldest first; past 50, the rest are counted.
func TestExecutionEventsOneBatchPerStatement(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	b := startBroker(t, pool, events.Config{})
	ch := subscribe(t, b)
	first, second := insertExecution(t, pool), insertExecution(t, pool)

	exec(t, pool, `INSERT INTO switchyard_execution_event (execution_id, type, step_key) VALUES
		($1, 'step_started', 'a'), ($2, 'step_started', 'b'), ($1, 'execution_paused', NULL)`, first, second)
	batch := next(t, ch)
	if len(batch.Executions) != 3 || len(batch.Events) != 0 || batch.Truncated != 0 || batch.NeedsRefresh() {
		t.Fatalf("insert of 3: batch %+v, want 3 execution events", batch)
	}
	want := []struct {
		exec      int64
		typ, step string
	}{{first, "step_started", "a"}, {second, "step_started", "b"}, {first, "execution_paused", ""}}
	for i, e := range batch.Executions {
		if e.ExecutionID != want[i].exec || e.Type != want[i].typ || e.Step != want[i].step {
			t.Errorf("event %d = %+v, want %+v", i, e, want[i])
		}
		if i > 0 && e.ID <= batch.Executions[i-1].ID {
			t.Errorf("event %d has id %d after %d: want oldest first", i, e.ID, batch.Executions[i-1].ID)
		}
	}

	exec(t, pool, `INSERT INTO switchyard_execution_event (execution_id, type, step_key)
		SELECT $1, 'step_started', 's' || i FROM generate_series(1, 200) i`, first)
	batch = next(t, ch)
	if len(batch.Executions) != 50 || batch.Truncated != 150 || batch.Resync || !batch.NeedsRefresh() {
		t.Fatalf("insert of 200: %d events, truncated %d, resync %v; want 50, 150, false",
			len(batch.Executions), batch.Truncated, batch.Resync)
	}
	for i, e := range batch.Executions {
		if want := fmt.Sprintf("s%d", i+1); e.Step != want {
			t.Fatalf("event %d is step %q, want %q: the first 50 rows, oldest first", i, e.Step, want)
		}
	}
	assertEmpty(t, ch)
}

// TestExecutionPayloadStaysUnderLimit: type and step key are unbounded
// text, so long ones leave fewer than 50 entries in a notification, and one
// too long for a notification of its own is only counted. (Over 8000 bytes,
// pg_notify would fail the statement, and with it the engine's
// transaction.)
func TestExecutionPayloadStaysUnderLimit(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	b := startBroker(t, pool, events.Config{})
	ch := subscribe(t, b)
	execID := insertExecution(t, pool)

	typ, step := strings.Repeat("é", 300), strings.Repeat(`"`, 300)
	exec(t, pool, `INSERT INTO switchyard_execution_event (execution_id, type, step_key)
		SELECT $1, $2, $3 FROM generate_series(1, 60)`, execID, typ, step)
	batch := next(t, ch)
	if len(batch.Executions) == 0 || len(batch.Executions) >= 50 || len(batch.Executions)+batch.Truncated != 60 {
		t.Fatalf("%d events + %d truncated; want fewer than 50 listed and 60 in all", len(batch.Executions), batch.Truncated)
	}
	if e := batch.Executions[0]; e.Type != typ || e.Step != step {
		t.Errorf("type/step did not survive the round trip: %q, %q", e.Type, e.Step)
	}
	t.Logf("%d of 60 long execution events fit in one notification", len(batch.Executions))

	exec(t, pool, `INSERT INTO switchyard_execution_event (execution_id, type) VALUES ($1, $2)`, execID, strings.Repeat("x", 10000))
	batch = next(t, ch)
	if len(batch.Executions) != 0 || batch.Truncated != 1 || !batch.NeedsRefresh() {
		t.Fatalf("one oversized event: batch %+v, want it counted in Truncated", batch)
	}
}

// TestTasksAndExecutionsOnOneSubscription: both kinds arrive on one
// subscription, each notification as its own batch, in commit order (within
// a transaction, in the order the statements ran).
func TestTasksAndExecutionsOnOneSubscription(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	b := startBroker(t, pool, events.Config{})
	ch := subscribe(t, b)
	execID := insertExecution(t, pool)

	job := insertJob(t, pool, "before")
	started := appendEvent(t, pool, execID, "step_started", ptr("a"))
	assertEvent(t, next(t, ch), job, jobs.StateQueued, 0)
	assertExecution(t, next(t, ch), started)

	// As the engine does: a step's task and its history entry in one
	// transaction.
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var taskID, eventID int64
	if err := tx.QueryRow(t.Context(), "INSERT INTO river_job (kind, max_attempts, args) VALUES ('step', 1, '{}') RETURNING id").Scan(&taskID); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(t.Context(), "INSERT INTO switchyard_execution_event (execution_id, type, step_key) VALUES ($1, 'step_ready', 'b') RETURNING id", execID).Scan(&eventID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() WHERE id = $1", taskID); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	assertEvent(t, next(t, ch), taskID, jobs.StateQueued, 0)
	if batch := next(t, ch); len(batch.Executions) != 1 || batch.Executions[0].ID != eventID || len(batch.Events) != 0 {
		t.Fatalf("second batch of the transaction = %+v, want execution event %d", batch, eventID)
	}
	assertEvent(t, next(t, ch), taskID, jobs.StateInProgress, 1)
	assertEmpty(t, ch)
}
