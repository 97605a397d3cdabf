package demo_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard/switchyard/dbtest"
	"github.com/switchyard/switchyard/demo"
	"github.com/switchyard/switchyard/handlers"
	"github.com/switchyard/switchyard/jobs"
	"github.com/switchyard/switchyard/metrics"
	"github.com/switchyard/switchyard/processing"
	"github.com/switchyard/switchyard/workflow"
)

// TestDeployModelWorkflow runs the demo's workflow end to end on a real
// worker: retries, the parallel branch, the approval signal, the delay and
// the failing optional notification.
func TestDeployModelWorkflow(t *testing.T) {
	t.Parallel()
	pool, rdb, prefix := dbtest.NewPool(t), dbtest.Redis(t), dbtest.KeyPrefix(t)
	reg, mux := jobs.NewRegistry(), handlers.NewMux()
	if err := demo.Register(reg, mux); err != nil {
		t.Fatal(err)
	}
	client, err := jobs.NewInsertOnlyClient(pool, reg)
	if err != nil {
		t.Fatal(err)
	}
	engine, err := workflow.New(workflow.Config{CacheKeyPrefix: prefix}, workflow.Deps{Pool: pool, Jobs: client, Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	engine.RegisterHandlers(mux)
	m, err := metrics.New(prometheus.NewRegistry(), "test")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := processing.New(processing.Config{Guard: processing.GuardConfig{KeyPrefix: prefix}, FetchPollInterval: 50 * time.Millisecond},
		processing.Deps{Pool: pool, Redis: rdb, Registry: reg, Handlers: mux, Metrics: m, Workflow: engine})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })

	var def workflow.Definition
	if err := json.Unmarshal(demo.DeployModelWorkflow, &def); err != nil {
		t.Fatal(err)
	}
	res, err := engine.Start(t.Context(), &def)
	if err != nil {
		t.Fatal(err)
	}
	id := res.Execution.ID
	signalled := false
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		exec, err := engine.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range exec.Steps {
			if s.Key == "approve" && s.Status == workflow.StepWaiting && !signalled {
				if _, err := engine.Signal(t.Context(), id, "approval", json.RawMessage(`{"by":"test"}`), "k"); err != nil {
					t.Fatal(err)
				}
				signalled = true
			}
		}
		if exec.FinishedAt != nil {
			if exec.Status != workflow.StatusCompleted {
				t.Fatalf("execution %s: %s", exec.Status, exec.Error)
			}
			states := map[string]workflow.StepState{}
			for _, s := range exec.Steps {
				states[s.Key] = s
			}
			if states["notify"].Status != workflow.StepFailed || states["start-container"].Attempt != 2 || states["health-check"].Status != workflow.StepCompleted {
				t.Errorf("steps: notify %s, start-container attempt %d, health-check %s",
					states["notify"].Status, states["start-container"].Attempt, states["health-check"].Status)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution still %s", exec.Status)
		}
		<-tick.C
	}
}
