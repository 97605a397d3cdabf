package workflow_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/switchyard/switchyard/db"
	"github.com/switchyard/switchyard/jobs"
	"github.com/switchyard/switchyard/workflow"
)

// A step's retry is recorded by the engine but written to the task by
// River: the task stays running under the claim until the worker returns
// the error. Were the engine to make it available itself, another claim
// could come before River's completer flushes the first run's result, and
// that result, conditioned only on the task being running, would land on
// the new claim (found by the chaos suite: steps stuck running forever).
func TestStepRetryLeavesTheTaskToRiver(t *testing.T) {
	t.Parallel()
	b := setup(t)
	exec := b.start(t, &workflow.Definition{Name: "retried", Steps: []workflow.Step{task("a", "", "")}})
	tid := *step(mustGet(t, b, exec.ID), "a").TaskID
	var claim db.Claim
	if err := b.pool.QueryRow(t.Context(), `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now()
		WHERE id = $1 RETURNING id, attempt, attempted_at`, tid).Scan(&claim.ID, &claim.Attempt, &claim.AttemptedAt); err != nil {
		t.Fatal(err)
	}
	ref := &jobs.WorkflowRef{ExecutionID: exec.ID, Step: "a", Role: "task"}
	retry := jobs.Outcome{Kind: jobs.OutcomeRetry, Err: errors.New("flaky"), RetryAt: time.Now()}

	stale := claim
	stale.AttemptedAt = claim.AttemptedAt.Add(-time.Second)
	if err := b.engine.Finish(t.Context(), stale, ref, retry); !errors.Is(err, db.ErrStaleClaim) {
		t.Fatalf("stale retry: %v, want ErrStaleClaim", err)
	}
	if err := b.engine.Finish(t.Context(), claim, ref, retry); err != nil {
		t.Fatal(err)
	}
	var (
		state   string
		attempt int
	)
	if err := b.pool.QueryRow(t.Context(), `SELECT state::text, attempt FROM river_job WHERE id = $1`, tid).Scan(&state, &attempt); err != nil {
		t.Fatal(err)
	}
	if state != "running" || attempt != 1 {
		t.Errorf("after the engine recorded the retry the task is %s (attempt %d), want still running (attempt 1)", state, attempt)
	}
	history, err := b.engine.History(t.Context(), exec.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	retried := 0
	for _, ev := range history {
		if ev.Type == "step_retried" {
			retried++
		}
	}
	if retried != 1 {
		t.Errorf("%d step_retried events, want 1", retried)
	}
}

// Many steps that fail once, retried at once, all complete: before River
// wrote step retries, a quick re-claim sometimes received the previous
// run's completion and the step never finished.
func TestFlakyStepsAllComplete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(t)
	b.startWorker(t)
	const executions, width = 10, 8
	var ids []int64
	for e := range executions {
		def := &workflow.Definition{Name: "flaky", Steps: []workflow.Step{task("root", "", "")}}
		var fan []string
		for i := range width {
			key := fmt.Sprintf("f%d", i)
			fan = append(fan, key)
			def.Steps = append(def.Steps, task(key, "flaky", "", "root"))
		}
		def.Steps = append(def.Steps, task("join", "flaky", "", fan...))
		exec := b.start(t, def)
		b.mu.Lock()
		for _, k := range append(fan, "join") {
			b.flaky[fmt.Sprintf("%d/%s", exec.ID, k)] = 1
		}
		b.mu.Unlock()
		ids = append(ids, exec.ID)
		_ = e
	}
	for _, id := range ids {
		b.waitStatus(t, id, workflow.StatusCompleted)
	}
}
