package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/db"
)

// Fault kinds.
const (
	FaultKill         = "kill"          // SIGKILL of a worker pod
	FaultRedisRestart = "redis-restart" // Redis shut down (nosave) and started again
	FaultPGRestart    = "pg-restart"    // pg_ctl restart -m fast
	FaultPause        = "pause"         // SIGSTOP of a worker pod, SIGCONT after a while
)

// FaultKinds lists the kinds in report order.
var FaultKinds = []string{FaultKill, FaultRedisRestart, FaultPGRestart, FaultPause}

// killedTaskTimeout bounds how long before a kill a ledger row may have
// started and still be in progress at the kill: chaos.work's timeout.
const killedTaskTimeout = 30 * time.Second

// recoveryWindow is how long after a restart the verifier looks for the
// longest gap between finished runs.
const recoveryWindow = 30 * time.Second

// LostTask is an expected task that did not end as designed.
type LostTask struct {
	TaskID int64  `json:"task_id"`
	Expect string `json:"expect"`
	// State is the river_job state at the end ("missing" if the row is gone).
	State string `json:"state"`
	// Effects is the number of runs that applied the task's effect.
	Effects int `json:"effects"`
}

// BadExecution is an expected workflow execution that did not complete.
type BadExecution struct {
	ID     int64  `json:"id"`
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
}

// PerTask summarises a count per task.
type PerTask struct {
	Tasks int     `json:"tasks"`
	Avg   float64 `json:"avg"`
	Max   int     `json:"max"`
	// Over1 is the number of tasks whose count exceeds one.
	Over1 int `json:"over_1"`
}

// FaultResult is one injected fault with what the verifier measured around
// it.
type FaultResult struct {
	ID        int64     `json:"id"`
	Kind      string    `json:"kind"`
	Target    string    `json:"target,omitempty"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
	Error     string    `json:"error,omitempty"`
	// DowntimeMS is how long the fault took: for a restart, from the
	// shutdown command until the service answered again.
	DowntimeMS int64 `json:"downtime_ms"`

	// For kills: the tasks the pod had in progress, how many of them ran
	// again, and the longest time from the kill to the next start of one
	// of them.
	TasksInProgress int   `json:"tasks_in_progress,omitempty"`
	TasksPickedUp   int   `json:"tasks_picked_up,omitempty"`
	LongestWaitMS   int64 `json:"longest_wait_ms,omitempty"`

	// For restarts: from the service being back to the next finished run,
	// and the longest gap between two finished runs from 5s before the
	// fault to 30s after it (how long work stalled).
	ResumedAfterMS int64 `json:"resumed_after_ms,omitempty"`
	LongestStallMS int64 `json:"longest_stall_ms,omitempty"`
}

// Verification is what the verifier found in the database.
type Verification struct {
	TasksExpected         int `json:"tasks_expected"`
	TasksCompleted        int `json:"tasks_completed"`
	TasksFailedAsDesigned int `json:"tasks_failed_as_designed"`
	// TasksLost are expected tasks that did not end as designed: not
	// final, final in the wrong state, gone, or completed without any
	// run having applied the effect.
	TasksLost                   int        `json:"tasks_lost"`
	TasksNotFinal               int        `json:"tasks_not_final"`
	TasksCompletedWithoutEffect int        `json:"tasks_completed_without_effect"`
	LostTasks                   []LostTask `json:"lost_tasks,omitempty"` // the first 20
	// TasksCompletedTwice counts chaos.work tasks (plain and workflow
	// steps) whose river_job row entered a final state more than once.
	TasksCompletedTwice int     `json:"tasks_completed_twice"`
	CompletedTwiceTasks []int64 `json:"completed_twice_tasks,omitempty"` // the first 20

	ExecutionsExpected  int `json:"executions_expected"`
	ExecutionsCompleted int `json:"executions_completed"`
	ExecutionsNotFinal  int `json:"executions_not_final"`
	// ExecutionsFailed are final but not completed (none is designed to).
	ExecutionsFailed int            `json:"executions_failed"`
	BadExecutions    []BadExecution `json:"bad_executions,omitempty"` // the first 20
	// StepsCompletedTwice counts (execution, step) pairs with more than
	// one step_completed event; ExecutionsFinishedTwice executions with
	// more than one final execution_* event.
	StepsCompletedTwice         int `json:"steps_completed_twice"`
	ExecutionsFinishedTwice     int `json:"executions_finished_twice"`
	StepsCompletedWithoutEffect int `json:"steps_completed_without_effect"`

	// Effects counts, per task, the handler runs that applied the effect
	// (at-least-once re-runs are allowed and counted here); Runs counts
	// every run, including those that failed on purpose or never finished.
	Effects        PerTask `json:"effects_per_task"`
	Runs           PerTask `json:"runs_per_task"`
	UnfinishedRuns int     `json:"unfinished_runs"`
	// StaleOutputs counts completed plain tasks whose recorded output
	// (the handler's, naming its pod) is not from the task's last claim:
	// a stale run's completion merged its output into the row after the
	// current claim completed it (River merges metadata even when the
	// task is no longer running). Reported, not failed: the task finished
	// once; see the README's delivery guarantee.
	StaleOutputs int `json:"stale_outputs"`
	// EffectMismatches counts tasks whose effect counter disagrees with
	// their ledger (the effect and the ledger row share a transaction, so
	// this must be zero).
	EffectMismatches int `json:"effect_mismatches"`

	Faults      []FaultResult  `json:"faults"`
	FaultCounts map[string]int `json:"fault_counts"`
	// KilledTasks are the tasks killed pods had in progress; the longest
	// wait is from a kill to the next start of one of its tasks.
	KilledTasks           int   `json:"killed_tasks"`
	KilledTasksPickedUp   int   `json:"killed_tasks_picked_up"`
	LongestKilledWaitMS   int64 `json:"longest_killed_task_wait_ms"`
	LongestRedisStallMS   int64 `json:"longest_redis_restart_stall_ms"`
	LongestPGStallMS      int64 `json:"longest_pg_restart_stall_ms"`
	LongestPGResumedMS    int64 `json:"longest_pg_restart_resumed_after_ms"`
	LongestRedisResumedMS int64 `json:"longest_redis_restart_resumed_after_ms"`

	// Problems lists every failed check; empty means the run passed.
	Problems []string `json:"problems"`
}

// OK reports whether every check passed.
func (v *Verification) OK() bool { return len(v.Problems) == 0 }

const listLimit = 20

// VerifyOptions tune the verifier.
type VerifyOptions struct {
	// ProductionEnd is when the producer stopped: gaps between finished
	// runs after it are the load ending, not a stall, so stall windows end
	// there. Zero: no bound.
	ProductionEnd time.Time
}

// Verify runs every check over the suite's tables, River's and the
// workflow engine's. It only reads.
func Verify(ctx context.Context, q db.DBTX, opts VerifyOptions) (*Verification, error) {
	v := &Verification{FaultCounts: map[string]int{}}
	steps := []func(context.Context, db.DBTX, *Verification) error{
		verifyTasks, verifyCompletedTwice, verifyExecutions, verifyRuns,
		func(ctx context.Context, q db.DBTX, v *Verification) error { return verifyFaults(ctx, q, v, opts) },
	}
	for _, step := range steps {
		if err := step(ctx, q, v); err != nil {
			return nil, fmt.Errorf("chaos: verify: %w", err)
		}
	}
	v.problems()
	return v, nil
}

func (v *Verification) problems() {
	add := func(n int, format string) {
		if n > 0 {
			v.Problems = append(v.Problems, fmt.Sprintf(format, n))
		}
	}
	add(v.TasksLost, "%d tasks lost (expected, not ended as designed)")
	add(v.TasksCompletedTwice, "%d tasks completed twice (river_job finalized more than once)")
	add(v.StepsCompletedTwice, "%d workflow steps completed twice (more than one step_completed event)")
	add(v.ExecutionsFinishedTwice, "%d executions finished twice (more than one final event)")
	add(v.ExecutionsNotFinal, "%d executions not in a final state")
	add(v.ExecutionsFailed, "%d executions ended in a final state other than completed")
	add(v.StepsCompletedWithoutEffect, "%d workflow steps completed without any run applying their effect")
	add(v.EffectMismatches, "%d tasks whose effect counter disagrees with the ledger")
}

const tasksSQL = `
SELECT x.task_id, x.expect, coalesce(j.state::text, 'missing'),
       (SELECT count(*) FROM chaos_ledger l WHERE l.task_id = x.task_id AND l.outcome = 'done')
FROM chaos_expected x
LEFT JOIN river_job j ON j.id = x.task_id
WHERE x.kind = 'task'
ORDER BY x.task_id`

func verifyTasks(ctx context.Context, q db.DBTX, v *Verification) error {
	rows, err := q.Query(ctx, tasksSQL)
	if err != nil {
		return err
	}
	var t LostTask
	_, err = pgx.ForEachRow(rows, []any{&t.TaskID, &t.Expect, &t.State, &t.Effects}, func() error {
		v.TasksExpected++
		switch {
		case t.Expect == "completed" && t.State == "completed" && t.Effects > 0:
			v.TasksCompleted++
			return nil
		case t.Expect == "failed" && t.State == "discarded":
			v.TasksFailedAsDesigned++
			return nil
		}
		v.TasksLost++
		switch t.State {
		case "completed":
			if t.Effects == 0 {
				v.TasksCompletedWithoutEffect++
			}
		case "discarded", "cancelled":
		default:
			v.TasksNotFinal++
		}
		if len(v.LostTasks) < listLimit {
			v.LostTasks = append(v.LostTasks, t)
		}
		return nil
	})
	return err
}

const completedTwiceSQL = `
SELECT task_id FROM chaos_final GROUP BY task_id HAVING count(*) > 1 ORDER BY task_id`

func verifyCompletedTwice(ctx context.Context, q db.DBTX, v *Verification) error {
	rows, err := q.Query(ctx, completedTwiceSQL)
	if err != nil {
		return err
	}
	var id int64
	_, err = pgx.ForEachRow(rows, []any{&id}, func() error {
		v.TasksCompletedTwice++
		if len(v.CompletedTwiceTasks) < listLimit {
			v.CompletedTwiceTasks = append(v.CompletedTwiceTasks, id)
		}
		return nil
	})
	return err
}

const executionsSQL = `
SELECT x.execution_id, coalesce(e.status, 'missing'), coalesce(e.error, '')
FROM chaos_expected x
LEFT JOIN switchyard_execution e ON e.id = x.execution_id
WHERE x.kind = 'workflow'
ORDER BY x.execution_id`

const stepsCompletedTwiceSQL = `
SELECT count(*) FROM (
    SELECT 1 FROM switchyard_execution_event ev
    JOIN chaos_expected x ON x.execution_id = ev.execution_id
    WHERE ev.type = 'step_completed'
    GROUP BY ev.execution_id, ev.step_key
    HAVING count(*) > 1) d`

const executionsFinishedTwiceSQL = `
SELECT count(*) FROM (
    SELECT 1 FROM switchyard_execution_event ev
    JOIN chaos_expected x ON x.execution_id = ev.execution_id
    WHERE ev.type IN ('execution_completed', 'execution_failed', 'execution_cancelled', 'execution_timed_out')
    GROUP BY ev.execution_id
    HAVING count(*) > 1) d`

const stepsWithoutEffectSQL = `
SELECT count(*)
FROM switchyard_step s
JOIN chaos_expected x ON x.execution_id = s.execution_id
WHERE s.kind = 'task' AND s.status = 'completed'
  AND NOT EXISTS (SELECT 1 FROM chaos_ledger l
                  WHERE l.execution_id = s.execution_id AND l.step = s.key AND l.outcome = 'done')`

func verifyExecutions(ctx context.Context, q db.DBTX, v *Verification) error {
	rows, err := q.Query(ctx, executionsSQL)
	if err != nil {
		return err
	}
	var e BadExecution
	_, err = pgx.ForEachRow(rows, []any{&e.ID, &e.Status, &e.Error}, func() error {
		v.ExecutionsExpected++
		switch e.Status {
		case "completed":
			v.ExecutionsCompleted++
			return nil
		case "failed", "cancelled", "timed_out":
			v.ExecutionsFailed++
		default:
			v.ExecutionsNotFinal++
		}
		if len(v.BadExecutions) < listLimit {
			v.BadExecutions = append(v.BadExecutions, e)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range []struct {
		sql string
		dst *int
	}{
		{stepsCompletedTwiceSQL, &v.StepsCompletedTwice},
		{executionsFinishedTwiceSQL, &v.ExecutionsFinishedTwice},
		{stepsWithoutEffectSQL, &v.StepsCompletedWithoutEffect},
	} {
		if err := q.QueryRow(ctx, c.sql).Scan(c.dst); err != nil {
			return err
		}
	}
	return nil
}

const effectsSQL = `
SELECT count(*), coalesce(avg(n), 0)::float8, coalesce(max(n), 0), count(*) FILTER (WHERE n > 1)
FROM (SELECT count(*) AS n FROM chaos_ledger WHERE outcome = 'done' GROUP BY task_id) d`

const runsSQL = `
SELECT count(*), coalesce(avg(n), 0)::float8, coalesce(max(n), 0), count(*) FILTER (WHERE n > 1), coalesce(sum(unfinished), 0)
FROM (SELECT count(*) AS n, count(*) FILTER (WHERE finished_at IS NULL) AS unfinished
      FROM chaos_ledger GROUP BY task_id) d`

const effectMismatchSQL = `
SELECT count(*)
FROM chaos_effect e
FULL JOIN (SELECT task_id, count(*) AS n FROM chaos_ledger WHERE outcome = 'done' GROUP BY task_id) d
  ON d.task_id = e.task_id
WHERE e.applied IS DISTINCT FROM d.n`

const staleOutputsSQL = `
SELECT count(*)
FROM chaos_expected x
JOIN river_job j ON j.id = x.task_id
WHERE x.kind = 'task' AND j.state = 'completed' AND j.metadata ? 'output'
  AND j.metadata->'output'->>'pod' IS DISTINCT FROM j.attempted_by[array_length(j.attempted_by, 1)]`

func verifyRuns(ctx context.Context, q db.DBTX, v *Verification) error {
	if err := q.QueryRow(ctx, staleOutputsSQL).Scan(&v.StaleOutputs); err != nil {
		return err
	}
	e := &v.Effects
	if err := q.QueryRow(ctx, effectsSQL).Scan(&e.Tasks, &e.Avg, &e.Max, &e.Over1); err != nil {
		return err
	}
	r := &v.Runs
	if err := q.QueryRow(ctx, runsSQL).Scan(&r.Tasks, &r.Avg, &r.Max, &r.Over1, &v.UnfinishedRuns); err != nil {
		return err
	}
	return q.QueryRow(ctx, effectMismatchSQL).Scan(&v.EffectMismatches)
}

const faultsSQL = `
SELECT id, kind, target, started_at, ended_at, coalesce(error, '')
FROM chaos_fault ORDER BY started_at, id`

// killedTasksSQL lists the tasks a killed pod had in progress and, for each,
// the first start of a run after the kill. In progress means: claimed by
// the pod (running, the pod last in attempted_by) when the suite looked
// just after the kill (chaos_fault_task), or a run of the pod in the
// ledger that started before the kill (within the task timeout), never
// finished, and was the task's latest run at the kill. A task that ended
// final with the killed pod still its last claimer is left out: the pod's
// own completion, sent before the kill, landed after it, and nobody had
// to pick the task up.
const killedTasksSQL = `
WITH k AS (
    SELECT ft.task_id FROM chaos_fault_task ft WHERE ft.fault_id = $1
    UNION
    SELECT l.task_id FROM chaos_ledger l
    WHERE l.pod = $2 AND l.finished_at IS NULL
      AND l.started_at <= $3::timestamptz AND l.started_at > $3::timestamptz - make_interval(secs => $4::float8)
      AND NOT EXISTS (SELECT 1 FROM chaos_ledger l2
                      WHERE l2.task_id = l.task_id AND l2.started_at > l.started_at AND l2.started_at <= $3)
)
SELECT k.task_id,
       (SELECT extract(epoch FROM min(l.started_at) - $3) * 1000 FROM chaos_ledger l
        WHERE l.task_id = k.task_id AND l.started_at > $3)::float8
FROM k
LEFT JOIN river_job j ON j.id = k.task_id
WHERE coalesce(j.kind, 'chaos.work') = 'chaos.work'
  AND NOT coalesce(j.state IN ('completed', 'discarded', 'cancelled') AND j.attempted_by[array_length(j.attempted_by, 1)] = $2, false)
ORDER BY k.task_id`

// recoverySQL measures a restart: the first finished run after the service
// was back, and the longest gap between finished runs (window edges count
// as runs) from 5s before the fault to recoveryWindow after it, or to $4
// if that comes first (the next fault's start, or the end of production).
const recoverySQL = `
WITH w AS (
    SELECT $1::timestamptz - interval '5 seconds' AS lo,
           least($2::timestamptz + make_interval(secs => $3::float8), $4::timestamptz) AS hi
), t AS (
    SELECT finished_at AS at FROM chaos_ledger, w WHERE finished_at BETWEEN w.lo AND w.hi
    UNION ALL SELECT lo FROM w
    UNION ALL SELECT hi FROM w
)
SELECT (SELECT extract(epoch FROM min(finished_at) - $2) * 1000 FROM chaos_ledger WHERE finished_at >= $2)::float8,
       (SELECT extract(epoch FROM max(gap)) * 1000
        FROM (SELECT at - lag(at) OVER (ORDER BY at) AS gap FROM t) g)::float8`

func verifyFaults(ctx context.Context, q db.DBTX, v *Verification, opts VerifyOptions) error {
	end := opts.ProductionEnd
	if end.IsZero() {
		end = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	rows, err := q.Query(ctx, faultsSQL)
	if err != nil {
		return err
	}
	faults, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (FaultResult, error) {
		var f FaultResult
		err := row.Scan(&f.ID, &f.Kind, &f.Target, &f.StartedAt, &f.EndedAt, &f.Error)
		f.DowntimeMS = f.EndedAt.Sub(f.StartedAt).Milliseconds()
		return f, err
	})
	if err != nil {
		return err
	}
	for i := range faults {
		f := &faults[i]
		if f.Error != "" {
			continue // not injected (or not fully): nothing to measure
		}
		v.FaultCounts[f.Kind]++
		switch f.Kind {
		case FaultPause:
			// A frozen pod: what matters is the checks above (nothing lost
			// or finished twice when it resumes with stale claims).
		case FaultKill:
			if err := measureKill(ctx, q, f); err != nil {
				return err
			}
			v.KilledTasks += f.TasksInProgress
			v.KilledTasksPickedUp += f.TasksPickedUp
			v.LongestKilledWaitMS = max(v.LongestKilledWaitMS, f.LongestWaitMS)
		default:
			hi := end
			for _, next := range faults[i+1:] {
				if next.Error == "" && next.StartedAt.After(f.EndedAt) {
					hi = minTime(hi, next.StartedAt)
					break
				}
			}
			var resumed, stall *float64
			if err := q.QueryRow(ctx, recoverySQL, f.StartedAt, f.EndedAt, recoveryWindow.Seconds(), hi).Scan(&resumed, &stall); err != nil {
				return err
			}
			if resumed != nil {
				f.ResumedAfterMS = int64(max(*resumed, 0))
			}
			if stall != nil {
				f.LongestStallMS = int64(*stall)
			}
			if f.Kind == FaultPGRestart {
				v.LongestPGStallMS = max(v.LongestPGStallMS, f.LongestStallMS)
				v.LongestPGResumedMS = max(v.LongestPGResumedMS, f.ResumedAfterMS)
			} else {
				v.LongestRedisStallMS = max(v.LongestRedisStallMS, f.LongestStallMS)
				v.LongestRedisResumedMS = max(v.LongestRedisResumedMS, f.ResumedAfterMS)
			}
		}
	}
	v.Faults = faults
	return nil
}

func measureKill(ctx context.Context, q db.DBTX, f *FaultResult) error {
	rows, err := q.Query(ctx, killedTasksSQL, f.ID, f.Target, f.StartedAt, killedTaskTimeout.Seconds())
	if err != nil {
		return err
	}
	var (
		id   int64
		wait *float64
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &wait}, func() error {
		f.TasksInProgress++
		if wait != nil {
			f.TasksPickedUp++
			f.LongestWaitMS = max(f.LongestWaitMS, int64(*wait))
		}
		return nil
	})
	return err
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
