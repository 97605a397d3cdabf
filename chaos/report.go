package chaos

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

func ms(n int64) string {
	return (time.Duration(n) * time.Millisecond).Round(10 * time.Millisecond).String()
}

func dur(n int64) string { return (time.Duration(n) * time.Millisecond).String() }

// WriteTable prints the report for people: the checks, then one line per
// fault, then the verdict.
func (r *Report) WriteTable(w io.Writer) error {
	v := r.Verification
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	mark := func(n int) string {
		if n == 0 {
			return "ok"
		}
		return "FAIL"
	}
	fmt.Fprintf(tw, "switchyard chaos: %s of production, %d pods, %g tasks/s, %g workflows/s, %s schedule, seed %d\n",
		dur(r.DurationMS), r.Pods, r.Rate, r.WorkflowRate, r.Schedule, r.Seed)
	outage := ""
	if r.PGOutageMS > 0 {
		outage = fmt.Sprintf(" (down %s each)", dur(r.PGOutageMS))
	}
	pause := ""
	if r.PauseEveryMS > 0 {
		pause = fmt.Sprintf(", pause %s (for %s)", dur(r.PauseEveryMS), dur(r.PauseForMS))
	}
	fmt.Fprintf(tw, "faults every: kill %s, redis-restart %s, pg-restart %s%s%s; drain %s (%s)\n\n",
		every(r.KillEveryMS), every(r.RedisEveryMS), every(r.PGEveryMS), outage, pause, ms(r.DrainMS), map[bool]string{true: "everything final", false: "DEADLINE PASSED"}[r.Drained])

	fmt.Fprintln(tw, "CHECK\tVALUE\t")
	fmt.Fprintf(tw, "tasks expected (enqueue committed)\t%d\t\n", v.TasksExpected)
	fmt.Fprintf(tw, "  completed with effect\t%d\t\n", v.TasksCompleted)
	fmt.Fprintf(tw, "  failed as designed\t%d\t\n", v.TasksFailedAsDesigned)
	fmt.Fprintf(tw, "tasks lost\t%d\t%s\n", v.TasksLost, mark(v.TasksLost))
	if v.TasksLost > 0 {
		fmt.Fprintf(tw, "  of which not final / completed without effect\t%d / %d\t\n", v.TasksNotFinal, v.TasksCompletedWithoutEffect)
	}
	fmt.Fprintf(tw, "tasks completed twice (river_job finalized > once)\t%d\t%s\n", v.TasksCompletedTwice, mark(v.TasksCompletedTwice))
	fmt.Fprintf(tw, "workflow executions expected\t%d\t\n", v.ExecutionsExpected)
	fmt.Fprintf(tw, "  completed\t%d\t\n", v.ExecutionsCompleted)
	fmt.Fprintf(tw, "executions not in a final state\t%d\t%s\n", v.ExecutionsNotFinal, mark(v.ExecutionsNotFinal))
	fmt.Fprintf(tw, "executions failed, cancelled or timed out\t%d\t%s\n", v.ExecutionsFailed, mark(v.ExecutionsFailed))
	fmt.Fprintf(tw, "workflow steps completed twice (step_completed > once)\t%d\t%s\n", v.StepsCompletedTwice, mark(v.StepsCompletedTwice))
	fmt.Fprintf(tw, "executions finished twice\t%d\t%s\n", v.ExecutionsFinishedTwice, mark(v.ExecutionsFinishedTwice))
	fmt.Fprintf(tw, "workflow steps completed without effect\t%d\t%s\n", v.StepsCompletedWithoutEffect, mark(v.StepsCompletedWithoutEffect))
	fmt.Fprintf(tw, "effect/ledger mismatches\t%d\t%s\n", v.EffectMismatches, mark(v.EffectMismatches))
	fmt.Fprintf(tw, "handler executions per task, effect applied (avg / max)\t%.4f / %d\t%d of %d tasks ran more than once\n",
		v.Effects.Avg, v.Effects.Max, v.Effects.Over1, v.Effects.Tasks)
	fmt.Fprintf(tw, "handler runs per task, all (avg / max)\t%.4f / %d\t%d runs never finished\n", v.Runs.Avg, v.Runs.Max, v.UnfinishedRuns)
	fmt.Fprintf(tw, "completed tasks whose output is a stale run's\t%d\t\n", v.StaleOutputs)
	fmt.Fprintf(tw, "faults injected\t%s\t\n", faultCounts(v.FaultCounts))
	fmt.Fprintf(tw, "killed pods' tasks in progress (picked up again)\t%d (%d)\t\n", v.KilledTasks, v.KilledTasksPickedUp)
	fmt.Fprintf(tw, "longest wait of a killed pod's task (kill → next start)\t%s\t\n", ms(v.LongestKilledWaitMS))
	fmt.Fprintf(tw, "redis restart: longest resumed-after / stall\t%s / %s\t\n", ms(v.LongestRedisResumedMS), ms(v.LongestRedisStallMS))
	fmt.Fprintf(tw, "postgres restart: longest resumed-after / stall\t%s / %s\t\n", ms(v.LongestPGResumedMS), ms(v.LongestPGStallMS))
	fmt.Fprintf(tw, "tasks rescued from dead pods (pod logs)\t%d\t\n", r.RescuedTasks)
	fmt.Fprintf(tw, "guard locks lost (pod logs)\t%d\t\n", r.GuardLocksLost)
	fmt.Fprintf(tw, "pods crashed (exited on their own once ready)\t%d\t%s\n", len(r.PodCrashes), mark(len(r.PodCrashes)))
	fmt.Fprintf(tw, "pod start-ups failed (Postgres down; restarted)\t%d\t\n", len(r.PodStartFailures))
	fmt.Fprintf(tw, "enqueues failed during faults (not expected)\t%d tasks, %d workflows\t\n", r.TaskEnqueueErr, r.WorkflowStartErr)
	if err := tw.Flush(); err != nil {
		return err
	}

	if len(v.Faults) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "#\tAT\tFAULT\tTARGET\tDOWNTIME\tIN PROGRESS\tPICKED UP\tLONGEST WAIT\tRESUMED AFTER\tSTALL\t")
		for i, f := range v.Faults {
			at := f.StartedAt.Sub(r.Started).Round(100 * time.Millisecond)
			line := fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t", i+1, at, f.Kind, dash(f.Target), ms(f.DowntimeMS))
			if f.Kind == FaultKill {
				line += fmt.Sprintf("%d\t%d\t%s\t-\t-\t", f.TasksInProgress, f.TasksPickedUp, ms(f.LongestWaitMS))
			} else {
				line += fmt.Sprintf("-\t-\t-\t%s\t%s\t", ms(f.ResumedAfterMS), ms(f.LongestStallMS))
			}
			if f.Error != "" {
				line += " FAILED: " + f.Error
			}
			fmt.Fprintln(tw, line)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	for _, c := range r.PodCrashes {
		fmt.Fprintf(w, "\npod %s crashed at %s: %s (log %s)\n", c.Pod, c.At.Format(time.RFC3339), c.Err, c.LogFile)
	}
	for _, t := range v.LostTasks {
		fmt.Fprintf(w, "lost: task %d expected %s, is %s, %d effects\n", t.TaskID, t.Expect, t.State, t.Effects)
	}
	for _, id := range v.CompletedTwiceTasks {
		fmt.Fprintf(w, "completed twice: task %d\n", id)
	}
	for _, e := range v.BadExecutions {
		fmt.Fprintf(w, "execution %d is %s %s\n", e.ID, e.Status, e.Error)
	}
	if r.OK() {
		fmt.Fprintln(w, "\nRESULT: PASS")
	} else {
		fmt.Fprintf(w, "\nRESULT: FAIL\n  - %s\n", strings.Join(r.Problems, "\n  - "))
	}
	fmt.Fprintf(w, "database kept for inspection: %s (start it with scripts/chaos-services.sh start)\n", r.DatabaseURL)
	return nil
}

func every(n int64) string {
	if n <= 0 {
		return "off"
	}
	return dur(n)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func faultCounts(m map[string]int) string {
	parts := make([]string, 0, len(FaultKinds))
	for _, k := range FaultKinds {
		if k == FaultPause && m[k] == 0 {
			continue // opt-in
		}
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
