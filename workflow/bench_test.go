package workflow_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/switchyard/switchyard/workflow"
)

// Benchmarks of the engine on the local Postgres and Redis, with one worker
// pod (executor size 20). Run:
//
//	go test ./workflow -run '^$' -bench . -benchtime 3x
//
// Each reports step completions per second and the median time from a
// step's last dependency completing to the step's handler starting.

func BenchmarkFanOutFanIn(b *testing.B) {
	const width = 200
	steps := []workflow.Step{task("root", "", "")}
	var branches []string
	for i := range width {
		k := fmt.Sprintf("b%d", i)
		branches = append(branches, k)
		steps = append(steps, task(k, "", "", "root"))
	}
	steps = append(steps, task("join", "", "", branches...))
	runBench(b, []*workflow.Definition{{Name: "fan", Steps: steps}})
}

func BenchmarkLinearChains(b *testing.B) {
	const chains, length = 20, 10
	var defs []*workflow.Definition
	for c := range chains {
		var steps []workflow.Step
		for i := range length {
			var deps []string
			if i > 0 {
				deps = []string{fmt.Sprintf("s%d", i-1)}
			}
			steps = append(steps, task(fmt.Sprintf("s%d", i), "", "", deps...))
		}
		defs = append(defs, &workflow.Definition{Name: fmt.Sprintf("chain-%d", c), Steps: steps})
	}
	runBench(b, defs)
}

func runBench(b *testing.B, defs []*workflow.Definition) {
	bundle := setup(b)
	bundle.startWorker(b)
	var (
		steps     int
		elapsed   time.Duration
		latencies []time.Duration
	)
	for b.Loop() {
		start := time.Now()
		var ids []int64
		for _, d := range defs {
			res, err := bundle.engine.Start(b.Context(), d)
			if err != nil {
				b.Fatal(err)
			}
			ids = append(ids, res.Execution.ID)
			steps += len(d.Steps)
		}
		for _, id := range ids {
			bundle.waitStatus(b, id, workflow.StatusCompleted)
		}
		elapsed += time.Since(start)
		for _, id := range ids {
			latencies = append(latencies, dispatchLatencies(b, bundle, id)...)
		}
	}
	b.ReportMetric(float64(steps)/elapsed.Seconds(), "steps/s")
	if len(latencies) > 0 {
		slices.Sort(latencies)
		b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "ms-p50-dep-start")
		b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "ms-p99-dep-start")
	}
}

// dispatchLatencies measures, from the history, each step's start minus
// the completion of its last dependency.
func dispatchLatencies(b *testing.B, bundle *testBundle, id int64) []time.Duration {
	exec, err := bundle.engine.Get(b.Context(), id)
	if err != nil {
		b.Fatal(err)
	}
	history, err := bundle.engine.History(b.Context(), id, 0, 5000)
	if err != nil {
		b.Fatal(err)
	}
	completed, started := map[string]time.Time{}, map[string]time.Time{}
	for _, ev := range history {
		switch ev.Type {
		case "step_completed":
			completed[ev.Step] = ev.At
		case "step_started":
			if _, ok := started[ev.Step]; !ok {
				started[ev.Step] = ev.At
			}
		}
	}
	var out []time.Duration
	for _, s := range exec.Steps {
		if len(s.DependsOn) == 0 {
			continue
		}
		var last time.Time
		for _, d := range s.DependsOn {
			if completed[d].After(last) {
				last = completed[d]
			}
		}
		if st, ok := started[s.Key]; ok && !last.IsZero() {
			out = append(out, st.Sub(last))
		}
	}
	return out
}
