package workflow_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/switchyard/switchyard/db"
	"github.com/switchyard/switchyard/jobs"
	"github.com/switchyard/switchyard/workflow"
)

// claimTask plays a worker claiming a step's task.
func claimTask(t *testing.T, b *testBundle, taskID int64) db.Claim {
	t.Helper()
	var c db.Claim
	if err := b.pool.QueryRow(t.Context(), `UPDATE river_job SET state = 'running', attempt = attempt + 1, attempted_at = clock_timestamp()
		WHERE id = $1 RETURNING id, attempt, attempted_at`, taskID).Scan(&c.ID, &c.Attempt, &c.AttemptedAt); err != nil {
		t.Fatal(err)
	}
	return c
}

// Outcomes and starts of one execution arriving together are written in
// shared transactions and statements; each is still fenced on its own
// claim, and the join is dispatched exactly once.
func TestConcurrentOutcomesOfOneExecution(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const width = 30
	steps := []workflow.Step{task("root", "", "")}
	var branches []string
	for i := range width {
		k := fmt.Sprintf("b%d", i)
		branches = append(branches, k)
		steps = append(steps, task(k, "", "", "root"))
	}
	steps = append(steps, task("join", "", "", branches...))
	exec := b.start(t, &workflow.Definition{Name: "fan", Steps: steps})
	ref := func(key string, deps ...string) *jobs.WorkflowRef {
		return &jobs.WorkflowRef{ExecutionID: exec.ID, Step: key, Role: "task", DependsOn: deps}
	}
	done := jobs.Outcome{Kind: jobs.OutcomeCompleted, Output: []byte(`{"ok":true}`)}

	root := claimTask(t, b, *step(mustGet(t, b, exec.ID), "root").TaskID)
	if err := b.engine.StepStarted(t.Context(), root, ref("root")); err != nil {
		t.Fatal(err)
	}
	if err := b.engine.Finish(t.Context(), root, ref("root"), done); err != nil {
		t.Fatal(err)
	}

	got := mustGet(t, b, exec.ID)
	claims := map[string]db.Claim{}
	for _, k := range branches {
		s := step(got, k)
		if s.Status != workflow.StepReady || s.TaskID == nil {
			t.Fatalf("branch %s: %s, task %v", k, s.Status, s.TaskID)
		}
		claims[k] = claimTask(t, b, *s.TaskID)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*width)
	for _, k := range branches {
		wg.Go(func() { errs <- b.engine.StepStarted(t.Context(), claims[k], ref(k, "root")) })
	}
	wg.Wait()
	stale := claims["b0"]
	stale.AttemptedAt = stale.AttemptedAt.Add(-time.Second)
	var staleErr error
	for _, k := range branches {
		wg.Go(func() { errs <- b.engine.Finish(t.Context(), claims[k], ref(k, "root"), done) })
	}
	wg.Go(func() { staleErr = b.engine.Finish(t.Context(), stale, ref("b0", "root"), done) })
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if !errors.Is(staleErr, db.ErrStaleClaim) {
		t.Errorf("stale claim: %v, want ErrStaleClaim", staleErr)
	}

	got = mustGet(t, b, exec.ID)
	if got.StepsFinal != width+1 || got.Status != workflow.StatusRunning || step(got, "join").Status != workflow.StepReady {
		t.Fatalf("after the branches: final %d, status %s, join %s", got.StepsFinal, got.Status, step(got, "join").Status)
	}
	var joinTasks int
	if err := b.pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job WHERE metadata->'switchyard'->'workflow'->>'step' = 'join'`).Scan(&joinTasks); err != nil {
		t.Fatal(err)
	}
	if joinTasks != 1 {
		t.Errorf("join dispatched %d times", joinTasks)
	}
	join := claimTask(t, b, *step(got, "join").TaskID)
	if err := b.engine.StepStarted(t.Context(), join, ref("join", branches...)); err != nil {
		t.Fatal(err)
	}
	if err := b.engine.Finish(t.Context(), join, ref("join", branches...), done); err != nil {
		t.Fatal(err)
	}
	got = mustGet(t, b, exec.ID)
	if got.Status != workflow.StatusCompleted || got.StepsFinal != width+2 {
		t.Errorf("at the end: %s, final %d", got.Status, got.StepsFinal)
	}
	history, err := b.engine.History(t.Context(), exec.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, ev := range history {
		count[ev.Type]++
	}
	if count["step_started"] != width+2 || count["step_completed"] != width+2 || count["step_ready"] != width+2 || count["execution_completed"] != 1 {
		t.Errorf("history: %v", count)
	}
}
