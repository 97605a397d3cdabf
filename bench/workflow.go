package bench

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard/switchyard/handlers"
	"github.com/switchyard/switchyard/jobs"
	"github.com/switchyard/switchyard/metrics"
	"github.com/switchyard/switchyard/processing"
	"github.com/switchyard/switchyard/workflow"
)

// workflowPoolSize is the worker's Postgres pool: each step's outcome is a
// transaction, so the pool, not the executor size, bounds how many are
// written at once.
const workflowPoolSize = 60

// stepArgs are the (empty) arguments of the workflows' steps, whose
// handler returns a small output.
type stepArgs struct{}

func (stepArgs) TaskType() string { return "bench.step" }

// workflowShape is one workflow measurement: the executions to run.
type workflowShape struct {
	id, label string
	defs      []*workflow.Definition
}

func stepTask(key string, deps ...string) workflow.Step {
	return workflow.Step{Key: key, DependsOn: deps, Task: &workflow.TaskSpec{Type: "bench.step"}}
}

func (r *runner) workflowShapes() []workflowShape {
	sz := r.sizes
	var fan []*workflow.Definition
	for range sz.FanOutRuns {
		steps := []workflow.Step{stepTask("root")}
		var branches []string
		for i := range sz.FanOutWidth {
			k := fmt.Sprintf("b%d", i)
			branches = append(branches, k)
			steps = append(steps, stepTask(k, "root"))
		}
		steps = append(steps, stepTask("join", branches...))
		fan = append(fan, &workflow.Definition{Name: "fan", Steps: steps})
	}
	var chains []*workflow.Definition
	for range sz.Chains {
		var steps []workflow.Step
		for i := range sz.ChainLength {
			var deps []string
			if i > 0 {
				deps = []string{fmt.Sprintf("s%d", i-1)}
			}
			steps = append(steps, stepTask(fmt.Sprintf("s%d", i), deps...))
		}
		chains = append(chains, &workflow.Definition{Name: "chain", Steps: steps})
	}
	return []workflowShape{
		{"fan_out", fmt.Sprintf("fan-out/fan-in (%d×%d steps)", sz.FanOutRuns, sz.FanOutWidth+2), fan},
		{"chains", fmt.Sprintf("linear chains (%d×%d steps)", sz.Chains, sz.ChainLength), chains},
	}
}

func (r *runner) workflows(ctx context.Context, params map[string]any) ([]Figure, error) {
	queueParams(params)
	params["fan_out_width"] = r.sizes.FanOutWidth
	params["fan_out_executions"] = r.sizes.FanOutRuns
	params["chains"] = r.sizes.Chains
	params["chain_length"] = r.sizes.ChainLength
	params["guard"] = string(processing.GuardBestEffort)
	params["db_pool_size"] = workflowPoolSize
	var figs []Figure
	plain, havePlain := r.figures["throughput.full_pipeline"]
	for _, shape := range r.workflowShapes() {
		rate, lat, err := r.workflowOnce(ctx, shape)
		if err != nil {
			return nil, err
		}
		f := Figure{ID: "workflow." + shape.id + ".steps_per_s", Label: "workflow step completions/s, " + shape.label, Unit: "steps/s", Value: rate,
			Target: atLeast("value", 5000)}
		if havePlain {
			f = withBaseline(f, plain.Value, "plain no-op tasks/s")
		}
		figs = append(figs,
			f,
			Figure{ID: "workflow." + shape.id + ".dependent_start_p50", Label: "step done→dependent started p50, " + shape.id, Unit: "ms",
				Value: percentile(lat, 50), Target: atMost("value", 10)},
			Figure{ID: "workflow." + shape.id + ".dependent_start_p99", Label: "step done→dependent started p99, " + shape.id, Unit: "ms",
				Value: percentile(lat, 99)},
		)
	}
	return figs, nil
}

// workflowOnce runs the shape's executions on one worker (the full
// pipeline with the engine) and returns step completions per second and the
// step-done-to-dependent-started times.
func (r *runner) workflowOnce(ctx context.Context, shape workflowShape) (float64, []time.Duration, error) {
	pool, _, err := r.newDatabase(ctx, switchyardSchema, workflowPoolSize)
	if err != nil {
		return 0, nil, err
	}
	defer pool.Close()
	reg := jobs.NewRegistry()
	if err := jobs.Register[stepArgs](reg, jobs.TypeConfig{Queue: benchQueue}); err != nil {
		return 0, nil, err
	}
	client, err := jobs.NewInsertOnlyClient(pool, reg)
	if err != nil {
		return 0, nil, err
	}
	engine, err := workflow.New(workflow.Config{CacheKeyPrefix: r.keyPrefix}, workflow.Deps{Pool: pool, Jobs: client, Redis: r.rdb, Logger: r.logger()})
	if err != nil {
		return 0, nil, err
	}
	var worked atomic.Int64
	mux := handlers.NewMux()
	mux.HandleFunc("bench.step", func(context.Context, *jobs.Task) (any, error) {
		worked.Add(1)
		return map[string]int{"n": 1}, nil
	})
	engine.RegisterHandlers(mux)
	m, err := metrics.New(prometheus.NewRegistry(), "bench")
	if err != nil {
		return 0, nil, err
	}
	svc, err := processing.New(processing.Config{
		Queues:            map[string]int{benchQueue: benchWorkers},
		FetchCooldown:     benchCooldown,
		FetchPollInterval: benchPollInterval,
		ShutdownTimeout:   5 * time.Second,
		Guard:             processing.GuardConfig{KeyPrefix: r.keyPrefix},
	}, processing.Deps{Pool: pool, Redis: r.rdb, Registry: reg, Handlers: mux, Metrics: m, Logger: r.logger(), Workflow: engine})
	if err != nil {
		return 0, nil, err
	}
	if err := svc.Start(ctx); err != nil {
		return 0, nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = svc.Stop(sctx)
	}()

	total := 0
	for _, d := range shape.defs {
		total += len(d.Steps)
	}
	r.logf("%s: %d executions, %d steps", shape.id, len(shape.defs), total)
	stopProfile := r.profile(shape.id)
	start := time.Now()
	ids := make([]int64, 0, len(shape.defs))
	for _, d := range shape.defs {
		res, err := engine.Start(ctx, d)
		if err != nil {
			stopProfile()
			return 0, nil, fmt.Errorf("start workflow: %w", err)
		}
		ids = append(ids, res.Execution.ID)
	}
	stopTicker := r.ticker(ctx, 2*time.Second, func() {
		w := worked.Load()
		r.logf("%s: %d/%d steps worked (%.0f/s)", shape.id, w, total, float64(w)/time.Since(start).Seconds())
	})
	err = waitFor(ctx, 10*time.Minute, 5*time.Millisecond, func() (bool, error) {
		var open int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM switchyard_execution WHERE id = ANY($1) AND status <> 'completed'`, ids).Scan(&open)
		return open == 0, err
	})
	elapsed := time.Since(start)
	stopTicker()
	stopProfile()
	if err != nil {
		return 0, nil, fmt.Errorf("%s: waiting for the executions to complete: %w", shape.id, err)
	}
	rate := float64(total) / elapsed.Seconds()

	var lat []time.Duration
	for _, id := range ids {
		l, err := dependentStarts(ctx, engine, id)
		if err != nil {
			return 0, nil, err
		}
		lat = append(lat, l...)
	}
	slices.Sort(lat)
	r.logf("%s: %d steps in %.2fs: %.0f steps/s; done→dependent started p50 %.1f ms, p99 %.1f ms",
		shape.id, total, elapsed.Seconds(), rate, percentile(lat, 50), percentile(lat, 99))
	return rate, lat, nil
}

// dependentStarts measures, from an execution's history, each step's start
// minus the completion of its last dependency (as workflow/bench_test.go
// does).
func dependentStarts(ctx context.Context, engine *workflow.Engine, id int64) ([]time.Duration, error) {
	exec, err := engine.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	completed, started := map[string]time.Time{}, map[string]time.Time{}
	for after := int64(0); ; {
		page, err := engine.History(ctx, id, after, 5000)
		if err != nil {
			return nil, err
		}
		for _, ev := range page {
			switch ev.Type {
			case "step_completed":
				completed[ev.Step] = ev.At
			case "step_started":
				if _, ok := started[ev.Step]; !ok {
					started[ev.Step] = ev.At
				}
			}
			after = ev.ID
		}
		if len(page) < 5000 {
			break
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
	return out, nil
}
