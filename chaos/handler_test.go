package chaos_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/switchyard/switchyard/chaos"
	"github.com/switchyard/switchyard/handlers"
	"github.com/switchyard/switchyard/jobs"
)

// The handler records each run in the ledger and applies the effect in the
// run's final transaction; runs that fail on purpose apply none.
func TestHandlerWritesLedgerAndEffect(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	reg, mux := jobs.NewRegistry(), handlers.NewMux()
	if err := chaos.Register(reg, mux, chaos.HandlerDeps{Pool: f.pool, PodID: "pod-t"}); err != nil {
		t.Fatal(err)
	}
	h, ok := mux.Handler(chaos.TaskType)
	if !ok {
		t.Fatal("no chaos.work handler")
	}
	run := func(id int64, attempt int, args chaos.WorkArgs, ref *jobs.WorkflowRef) error {
		raw, _ := json.Marshal(args)
		now := time.Now()
		_, err := h.ProcessTask(t.Context(), &jobs.Task{ID: id, Type: chaos.TaskType, Args: raw, Attempt: attempt, AttemptedAt: &now, Workflow: ref})
		return err
	}

	if err := run(1, 1, chaos.WorkArgs{SleepMS: 5}, nil); err != nil {
		t.Fatal(err)
	}
	if err := run(1, 2, chaos.WorkArgs{SleepMS: 0}, nil); err != nil { // a re-run: a second effect
		t.Fatal(err)
	}
	if err := run(2, 1, chaos.WorkArgs{FailFirst: true}, nil); err == nil {
		t.Error("fail_first: first attempt succeeded")
	}
	if err := run(2, 2, chaos.WorkArgs{FailFirst: true}, nil); err != nil {
		t.Errorf("fail_first: second attempt: %v", err)
	}
	var perm *jobs.PermanentError
	if err := run(3, 1, chaos.WorkArgs{FailPermanent: true}, nil); !errors.As(err, &perm) {
		t.Errorf("fail_permanent: %v, want a permanent error", err)
	}
	if err := run(4, 1, chaos.WorkArgs{}, &jobs.WorkflowRef{ExecutionID: 7, Step: "root", Role: "task"}); err != nil {
		t.Fatal(err)
	}

	rows, err := f.pool.Query(t.Context(), `
		SELECT l.task_id, l.attempt, l.pod, coalesce(l.outcome, ''), l.finished_at IS NOT NULL,
		       coalesce(l.execution_id, 0), coalesce(l.step, ''), coalesce(e.applied, 0)
		FROM chaos_ledger l LEFT JOIN chaos_effect e ON e.task_id = l.task_id
		WHERE l.task_id <= 4 ORDER BY l.task_id, l.attempt`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		task      int64
		attempt   int
		pod       string
		outcome   string
		finished  bool
		execution int64
		step      string
		applied   int
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.task, &r.attempt, &r.pod, &r.outcome, &r.finished, &r.execution, &r.step, &r.applied); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []row{
		{1, 1, "pod-t", "done", true, 0, "", 2},
		{1, 2, "pod-t", "done", true, 0, "", 2},
		{2, 1, "pod-t", "error", true, 0, "", 1},
		{2, 2, "pod-t", "done", true, 0, "", 1},
		{3, 1, "pod-t", "failed", true, 0, "", 0},
		{4, 1, "pod-t", "done", true, 7, "root", 1},
	}
	if len(got) != len(want) {
		t.Fatalf("ledger:\n%v\nwant\n%v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("ledger row %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	v, err := chaos.Verify(t.Context(), f.pool, chaos.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v.EffectMismatches != 0 {
		t.Errorf("%d effect mismatches after handler runs", v.EffectMismatches)
	}
}

// A run whose context ends while it works applies nothing and leaves its
// ledger row unfinished (what a killed pod's run looks like).
func TestHandlerInterruptedAppliesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	reg, mux := jobs.NewRegistry(), handlers.NewMux()
	if err := chaos.Register(reg, mux, chaos.HandlerDeps{Pool: f.pool, PodID: "pod-t"}); err != nil {
		t.Fatal(err)
	}
	h, _ := mux.Handler(chaos.TaskType)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	raw, _ := json.Marshal(chaos.WorkArgs{SleepMS: 10_000})
	if _, err := h.ProcessTask(ctx, &jobs.Task{ID: 9, Type: chaos.TaskType, Args: raw, Attempt: 1}); err == nil {
		t.Fatal("interrupted run succeeded")
	}
	var finished, effects int
	if err := f.pool.QueryRow(t.Context(), `SELECT count(finished_at), (SELECT count(*) FROM chaos_effect) FROM chaos_ledger WHERE task_id = 9`).Scan(&finished, &effects); err != nil {
		t.Fatal(err)
	}
	if finished != 0 || effects != 0 {
		t.Errorf("interrupted run: %d finished rows, %d effects", finished, effects)
	}
}
