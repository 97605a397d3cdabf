package chaos_test

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/chaos"
	"github.com/switchyard/switchyard/dbtest"
)

// fixture writes hand-made rows into a migrated database with the suite's
// tables, as a chaos run would leave them.
type fixture struct {
	t    *testing.T
	ctx  context.Context
	pool *pgxpool.Pool
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, ctx: t.Context(), pool: dbtest.NewPool(t)}
	if err := chaos.CreateTables(f.ctx, f.pool); err != nil {
		t.Fatal(err)
	}
	// Twice: the tables and triggers are created only if missing.
	if err := chaos.CreateTables(f.ctx, f.pool); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) exec(sql string, args ...any) {
	f.t.Helper()
	if _, err := f.pool.Exec(f.ctx, sql, args...); err != nil {
		f.t.Fatalf("%s: %v", sql, err)
	}
}

// job inserts a chaos.work river_job row in state and returns its id.
func (f *fixture) job(state string) int64 {
	f.t.Helper()
	var id int64
	err := f.pool.QueryRow(f.ctx, `
		INSERT INTO river_job (kind, args, max_attempts, state, attempt, finalized_at, queue, priority)
		VALUES ('chaos.work', '{}', 25, $1::river_job_state, 1,
		        CASE WHEN $1 IN ('completed', 'discarded', 'cancelled') THEN now() END, 'default', 1)
		RETURNING id`, state).Scan(&id)
	if err != nil {
		f.t.Fatal(err)
	}
	return id
}

// setState moves a job to state, as a worker or River would.
func (f *fixture) setState(id int64, state string) {
	f.exec(`UPDATE river_job SET state = $2::river_job_state,
		finalized_at = CASE WHEN $2 IN ('completed', 'discarded', 'cancelled') THEN now() END WHERE id = $1`, id, state)
}

func (f *fixture) expectTask(id int64, expect string) {
	f.exec(`INSERT INTO chaos_expected (kind, task_id, expect) VALUES ('task', $1, $2)`, id, expect)
}

// run adds a ledger row; finished zero means the run never finished.
func (f *fixture) run(task int64, pod string, started, finished time.Time, outcome string) {
	var fin *time.Time
	var out *string
	if !finished.IsZero() {
		fin, out = &finished, &outcome
	}
	f.exec(`INSERT INTO chaos_ledger (task_id, attempt, pod, started_at, finished_at, outcome) VALUES ($1, 1, $2, $3, $4, $5)`,
		task, pod, started, fin, out)
}

func (f *fixture) stepRun(task, execution int64, step string, at time.Time) {
	f.exec(`INSERT INTO chaos_ledger (task_id, attempt, pod, started_at, finished_at, outcome, execution_id, step)
		VALUES ($1, 1, 'pod-x', $2, $2, 'done', $3, $4)`, task, at, execution, step)
}

// execution inserts an expected execution with one task step "a" in
// stepStatus and the given history events.
func (f *fixture) execution(status, stepStatus string, events ...string) int64 {
	f.t.Helper()
	var id int64
	if err := f.pool.QueryRow(f.ctx, `INSERT INTO switchyard_execution (name, status, definition, steps_total)
		VALUES ('chaos', $1, '{}', 1) RETURNING id`, status).Scan(&id); err != nil {
		f.t.Fatal(err)
	}
	f.exec(`INSERT INTO switchyard_step (execution_id, key, position, kind, status, spec) VALUES ($1, 'a', 0, 'task', $2, '{}')`, id, stepStatus)
	for _, ev := range events {
		var step *string
		if ev == "step_completed" {
			a := "a"
			step = &a
		}
		f.exec(`INSERT INTO switchyard_execution_event (execution_id, type, step_key) VALUES ($1, $2, $3)`, id, ev, step)
	}
	f.exec(`INSERT INTO chaos_expected (kind, execution_id, expect) VALUES ('workflow', $1, 'completed')`, id)
	return id
}

func (f *fixture) fault(kind, target string, started, ended time.Time, errText string) int64 {
	f.t.Helper()
	var e *string
	if errText != "" {
		e = &errText
	}
	var id int64
	if err := f.pool.QueryRow(f.ctx, `INSERT INTO chaos_fault (kind, target, started_at, ended_at, error)
		VALUES ($1, $2, $3, $4, $5) RETURNING id`, kind, target, started, ended, e).Scan(&id); err != nil {
		f.t.Fatal(err)
	}
	return id
}

// effects sets chaos_effect to the ledger's done count for every task, as
// the handler's transactions would.
func (f *fixture) effects() {
	f.exec(`INSERT INTO chaos_effect (task_id, applied)
		SELECT task_id, count(*) FROM chaos_ledger WHERE outcome = 'done' GROUP BY task_id`)
}

func TestVerifyCountsHandMadeRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	sec := func(base time.Time, s float64) time.Time { return base.Add(time.Duration(s * float64(time.Second))) }

	// Plain tasks.
	t1 := f.job("completed") // completed once, one effect
	f.expectTask(t1, "completed")
	f.exec(`UPDATE river_job SET attempted_by = '{pod-a}', metadata = '{"output": {"pod": "pod-a"}}' WHERE id = $1`, t1)
	f.run(t1, "pod-a", t0, sec(t0, 1), "done")
	t2 := f.job("completed") // re-run after its effect: two executions, one completion
	f.expectTask(t2, "completed")
	// pod-b's claim completed it, but pod-a's stale completion merged its
	// output afterwards.
	f.exec(`UPDATE river_job SET attempted_by = '{pod-a,pod-b}', metadata = '{"output": {"pod": "pod-a"}}' WHERE id = $1`, t2)
	f.run(t2, "pod-a", t0, sec(t0, 1), "done")
	f.run(t2, "pod-b", sec(t0, 5), sec(t0, 6), "done")
	t3 := f.job("discarded") // failed as designed
	f.expectTask(t3, "failed")
	f.run(t3, "pod-a", t0, sec(t0, 1), "failed")
	t4 := f.job("available") // lost: never final
	f.expectTask(t4, "completed")
	t5 := f.job("completed") // lost: completed, no run applied the effect
	f.expectTask(t5, "completed")
	f.expectTask(987654321, "completed") // lost: the row is gone
	t7 := f.job("available")             // completed twice: finalized, back, finalized again
	f.expectTask(t7, "completed")
	f.setState(t7, "completed")
	f.setState(t7, "completed") // same state again: not a transition
	f.setState(t7, "available")
	f.setState(t7, "completed")
	f.run(t7, "pod-a", t0, sec(t0, 1), "done")
	t8 := f.job("completed") // lost: should have failed
	f.expectTask(t8, "failed")
	f.run(t8, "pod-a", t0, sec(t0, 1), "done")

	// Workflow executions.
	e1 := f.execution("completed", "completed", "step_completed", "execution_completed")
	f.stepRun(f.job("completed"), e1, "a", t0)
	f.execution("running", "running")
	f.execution("failed", "failed", "execution_failed")
	f.execution("completed", "completed", "step_completed", "step_completed", "execution_completed", "execution_completed")

	// A kill at k of pod-a.
	k := time.Date(2026, 1, 1, 11, 0, 0, 0, time.UTC)
	kill := f.fault(chaos.FaultKill, "pod-a", k, sec(k, 0.01), "")
	t9 := f.job("completed") // claimed at the kill and in the ledger; next start after 2.5s
	f.exec(`INSERT INTO chaos_fault_task (fault_id, task_id, attempt) VALUES ($1, $2, 1)`, kill, t9)
	f.run(t9, "pod-a", sec(k, -1), time.Time{}, "")
	f.run(t9, "pod-b", sec(k, 2.5), sec(k, 3), "done")
	t10 := f.job("completed") // only in the ledger; next start after 4s
	f.run(t10, "pod-a", sec(k, -0.5), time.Time{}, "")
	f.run(t10, "pod-b", sec(k, 4), sec(k, 5), "done")
	t11 := f.job("completed") // unfinished, but started longer than the task timeout before
	f.run(t11, "pod-a", sec(k, -40), time.Time{}, "")
	t12 := f.job("completed") // unfinished, but a later run started before the kill
	f.run(t12, "pod-a", sec(k, -2), time.Time{}, "")
	f.run(t12, "pod-b", sec(k, -1), sec(k, -0.5), "done")
	t13 := f.job("running") // claimed at the kill, never ran again
	f.exec(`INSERT INTO chaos_fault_task (fault_id, task_id, attempt) VALUES ($1, $2, 1)`, kill, t13)
	f.run(t13, "pod-a", sec(k, -1), time.Time{}, "")
	// Claimed at the kill, but the pod's own completion (sent before the
	// kill) landed after it: not waiting for anyone.
	t14 := f.job("completed")
	f.exec(`UPDATE river_job SET attempted_by = '{pod-a}' WHERE id = $1`, t14)
	f.exec(`INSERT INTO chaos_fault_task (fault_id, task_id, attempt) VALUES ($1, $2, 1)`, kill, t14)
	f.run(t14, "pod-a", sec(k, -1), sec(k, -0.1), "done")
	ctl := f.job("completed") // a workflow control task the pod had claimed: no ledger, not measured
	f.exec(`UPDATE river_job SET kind = 'switchyard.workflow', attempted_by = '{pod-a,pod-b}' WHERE id = $1`, ctl)
	f.exec(`INSERT INTO chaos_fault_task (fault_id, task_id, attempt) VALUES ($1, $2, 1)`, kill, ctl)
	t15 := f.job("completed") // claimed at the kill, then by pod-b: picked up
	f.exec(`UPDATE river_job SET attempted_by = '{pod-a,pod-b}' WHERE id = $1`, t15)
	f.exec(`INSERT INTO chaos_fault_task (fault_id, task_id, attempt) VALUES ($1, $2, 1)`, kill, t15)
	f.run(t15, "pod-b", sec(k, 3), sec(k, 3.5), "done")

	// A Postgres restart from s to s+1s, and a Redis restart that failed.
	s := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	f.fault(chaos.FaultPGRestart, "", s, sec(s, 1), "")
	for _, at := range []float64{-2, 1.5, 3} {
		f.run(f.job("completed"), "pod-c", sec(s, at-0.1), sec(s, at), "done")
	}
	f.fault(chaos.FaultRedisRestart, "", sec(s, -1800), sec(s, -1799), "redis-server: not found")
	// The next fault cuts the Postgres restart's stall window short.
	f.fault(chaos.FaultRedisRestart, "", sec(s, 1.2), sec(s, 1.3), "")

	f.effects()
	// An effect without its ledger row: the two disagree for t5.
	f.exec(`INSERT INTO chaos_effect (task_id, applied) VALUES ($1, 1)`, t5)

	v, err := chaos.Verify(f.ctx, f.pool, chaos.VerifyOptions{ProductionEnd: sec(s, 4)})
	if err != nil {
		t.Fatal(err)
	}
	ints := []struct {
		name      string
		got, want int
	}{
		{"tasks expected", v.TasksExpected, 8},
		{"tasks completed", v.TasksCompleted, 3},
		{"tasks failed as designed", v.TasksFailedAsDesigned, 1},
		{"tasks lost", v.TasksLost, 4},
		{"tasks not final", v.TasksNotFinal, 2},
		{"tasks completed without effect", v.TasksCompletedWithoutEffect, 1},
		{"tasks completed twice", v.TasksCompletedTwice, 1},
		{"executions expected", v.ExecutionsExpected, 4},
		{"executions completed", v.ExecutionsCompleted, 2},
		{"executions not final", v.ExecutionsNotFinal, 1},
		{"executions failed", v.ExecutionsFailed, 1},
		{"steps completed twice", v.StepsCompletedTwice, 1},
		{"executions finished twice", v.ExecutionsFinishedTwice, 1},
		{"steps completed without effect", v.StepsCompletedWithoutEffect, 1},
		{"effects: tasks", v.Effects.Tasks, 13},
		{"effects: max", v.Effects.Max, 2},
		{"effects: over 1", v.Effects.Over1, 1},
		{"runs: tasks", v.Runs.Tasks, 16},
		{"runs: max", v.Runs.Max, 2},
		{"runs: over 1", v.Runs.Over1, 4},
		{"unfinished runs", v.UnfinishedRuns, 5},
		{"stale outputs", v.StaleOutputs, 1},
		{"effect mismatches", v.EffectMismatches, 1},
		{"faults", len(v.Faults), 4},
		{"kill faults counted", v.FaultCounts[chaos.FaultKill], 1},
		{"pg faults counted", v.FaultCounts[chaos.FaultPGRestart], 1},
		{"redis faults counted (not the failed one)", v.FaultCounts[chaos.FaultRedisRestart], 1},
		{"killed tasks", v.KilledTasks, 4},
		{"killed tasks picked up", v.KilledTasksPickedUp, 3},
		{"problems", len(v.Problems), 8},
	}
	for _, c := range ints {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.name, c.got, c.want)
		}
	}
	floats := []struct {
		name      string
		got, want float64
	}{
		{"effects: avg", v.Effects.Avg, 14.0 / 13},
		{"runs: avg", v.Runs.Avg, 20.0 / 16},
	}
	for _, c := range floats {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	millis := []struct {
		name      string
		got, want int64
	}{
		{"longest killed task wait", v.LongestKilledWaitMS, 4000},
		{"pg restart resumed after", v.LongestPGResumedMS, 500},
		// Window: 5s before the restart to the next fault (s+1.2s);
		// finished runs at s-2: the longest gap is s-2 to s+1.2.
		{"pg restart stall", v.LongestPGStallMS, 3200},
		// The Redis restart (s+1.2 to s+1.3): window s-3.8 to the end of
		// production (s+4); runs at s-2, s+1.5, s+3. (The failed one is
		// not measured.)
		{"redis restart resumed after", v.LongestRedisResumedMS, 200},
		{"redis restart stall", v.LongestRedisStallMS, 3500},
	}
	for _, c := range millis {
		if c.got != c.want {
			t.Errorf("%s: %dms, want %dms", c.name, c.got, c.want)
		}
	}
	if !slices.Equal(v.CompletedTwiceTasks, []int64{t7}) {
		t.Errorf("completed twice: %v, want [%d]", v.CompletedTwiceTasks, t7)
	}
	var lost []int64
	for _, l := range v.LostTasks {
		lost = append(lost, l.TaskID)
	}
	if want := []int64{t4, t5, t8, 987654321}; !slices.Equal(lost, want) {
		t.Errorf("lost tasks %v, want %v", lost, want)
	}
	if v.OK() {
		t.Error("OK with problems")
	}
}

func TestVerifyEmptyRunPasses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	v, err := chaos.Verify(f.ctx, f.pool, chaos.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !v.OK() || v.TasksExpected != 0 || v.Effects.Tasks != 0 || len(v.Faults) != 0 {
		t.Errorf("empty run: %+v", v)
	}
}
