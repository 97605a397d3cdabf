// Package demo holds the example handlers that `switchyard serve
// --demo-handlers` registers and `make demo` uses: a simulated model
// deployment (the seed documents' example) whose steps take a little time,
// report what they did, and sometimes fail the way real ones do.
package demo

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/handlers"
	"github.com/switchyard/switchyard/jobs"
)

// DeployModelWorkflow is the demo's workflow definition (JSON): download a
// model, start a container and, in parallel, warm a cache; wait for an
// operator's approval; let traffic settle for a delay; configure the
// proxy; health-check; then notify (optional: the notifier is flaky).
//
//go:embed deploy-model.json
var DeployModelWorkflow []byte

// StepArgs are the arguments of every demo step type.
type StepArgs struct {
	// Model names the model the step acts on.
	Model string `json:"model"`
	// Work is how long the simulated work takes, e.g. "800ms".
	Work string `json:"work,omitempty"`
	// FailTimes makes the first FailTimes attempts fail (retried by policy).
	FailTimes int `json:"fail_times,omitempty"`
	// AlwaysFail makes every attempt fail permanently.
	AlwaysFail bool `json:"always_fail,omitempty"`
}

// Validate implements jobs.Validator.
func (a StepArgs) Validate() error {
	if a.Model == "" {
		return &jobs.ValidationError{Field: "args.model", Message: "is required"}
	}
	if a.Work != "" {
		if d, err := time.ParseDuration(a.Work); err != nil || d < 0 || d > time.Minute {
			return &jobs.ValidationError{Field: "args.work", Message: "must be a duration up to 1m"}
		}
	}
	return nil
}

type (
	downloadArgs  struct{ StepArgs }
	containerArgs struct{ StepArgs }
	cacheArgs     struct{ StepArgs }
	proxyArgs     struct{ StepArgs }
	healthArgs    struct{ StepArgs }
	notifyArgs    struct{ StepArgs }
)

func (downloadArgs) TaskType() string  { return "demo.download_model" }
func (containerArgs) TaskType() string { return "demo.start_container" }
func (cacheArgs) TaskType() string     { return "demo.warm_cache" }
func (proxyArgs) TaskType() string     { return "demo.configure_proxy" }
func (healthArgs) TaskType() string    { return "demo.health_check" }
func (notifyArgs) TaskType() string    { return "demo.notify" }

// Register adds the demo task types to reg and, if mux is not nil, their
// simulated handlers.
func Register(reg *jobs.Registry, mux *handlers.Mux) error {
	retry := jobs.TypeConfig{Retry: jobs.RetryPolicy{MaxAttempts: 5, InitialBackoff: 500 * time.Millisecond, Multiplier: 2, MaxBackoff: 5 * time.Second}}
	once := jobs.TypeConfig{Retry: jobs.RetryPolicy{MaxAttempts: 1}}
	errs := []error{
		jobs.Register[downloadArgs](reg, retry),
		jobs.Register[containerArgs](reg, retry),
		jobs.Register[cacheArgs](reg, retry),
		jobs.Register[proxyArgs](reg, retry),
		jobs.Register[healthArgs](reg, retry),
		jobs.Register[notifyArgs](reg, once),
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("register demo task types: %w", err)
	}
	if mux == nil {
		return nil
	}
	mux.Handle(downloadArgs{}.TaskType(), simulate(func(a StepArgs, ctx workflowInfo) any {
		return map[string]any{"model": a.Model, "path": "/models/" + a.Model, "bytes": 734_003_200}
	}))
	mux.Handle(containerArgs{}.TaskType(), simulate(func(a StepArgs, ctx workflowInfo) any {
		return map[string]any{"container": "ctr-" + a.Model, "image_from": string(ctx.outputs["download"])}
	}))
	mux.Handle(cacheArgs{}.TaskType(), simulate(func(a StepArgs, ctx workflowInfo) any {
		return map[string]any{"warmed_keys": 1024}
	}))
	mux.Handle(proxyArgs{}.TaskType(), simulate(func(a StepArgs, ctx workflowInfo) any {
		return map[string]any{"route": "/v1/models/" + a.Model, "approved_by": string(ctx.outputs["approve"])}
	}))
	mux.Handle(healthArgs{}.TaskType(), simulate(func(a StepArgs, ctx workflowInfo) any {
		return map[string]any{"status": "healthy", "p99_ms": 42}
	}))
	mux.Handle(notifyArgs{}.TaskType(), simulate(func(a StepArgs, ctx workflowInfo) any {
		return map[string]any{"notified": "#deployments"}
	}))
	return nil
}

type workflowInfo struct {
	outputs map[string][]byte
}

// simulate builds a handler that works for args.Work, fails as asked, and
// returns result's output.
func simulate(result func(StepArgs, workflowInfo) any) handlers.Handler {
	return handlers.HandlerFunc(func(ctx context.Context, task *jobs.Task) (any, error) {
		var a StepArgs
		if err := json.Unmarshal(task.Args, &a); err != nil {
			return nil, jobs.Permanent(err)
		}
		if a.Work != "" {
			d, _ := time.ParseDuration(a.Work)
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
		}
		if a.AlwaysFail {
			return nil, jobs.Permanent(fmt.Errorf("%s: the notification service rejected the message", task.Type))
		}
		if task.Attempt <= a.FailTimes {
			return nil, fmt.Errorf("%s: transient failure %d of %d", task.Type, task.Attempt, a.FailTimes)
		}
		info := workflowInfo{outputs: map[string][]byte{}}
		if task.Workflow != nil {
			for k, v := range task.Workflow.Outputs {
				info.outputs[k] = v
			}
		}
		return result(a, info), nil
	})
}
