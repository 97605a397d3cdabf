package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/jobs"
	"github.com/switchyard/switchyard/workflow"
)

// The mix the producer enqueues.
const (
	minSleepMS        = 10
	maxSleepMS        = 400
	failFirstPercent  = 10 // tasks and steps whose first attempt fails
	permanentPercent  = 2  // plain tasks that fail permanently, as designed
	optionalFailShare = 10 // executions with an optional step that fails permanently
	fanOut            = 3
	workflowDelay     = time.Second
	enqueueTimeout    = 3 * time.Second
	maxBackoff        = 2 * time.Second
)

// producerStats are the producer's counters.
type producerStats struct {
	tasks, workflows             atomic.Int64 // committed
	taskErrors, workflowErrors   atomic.Int64 // enqueues that failed (not expected)
	lastTaskErr, lastWorkflowErr atomic.Value // string
}

// producer enqueues chaos.work tasks and workflow executions at steady
// rates, each in one transaction with its chaos_expected row. An enqueue
// that fails (Postgres restarting) is not expected and not retried; the
// producer backs off and carries on at its rate.
type producer struct {
	pool   *pgxpool.Pool
	jobs   *jobs.Client
	engine *workflow.Engine
	stats  producerStats
}

// randomArgs draws a plain task's arguments and its expected end.
func randomArgs(rng *rand.Rand) (WorkArgs, string) {
	a := WorkArgs{SleepMS: minSleepMS + rng.IntN(maxSleepMS-minSleepMS+1)}
	switch n := rng.IntN(100); {
	case n < permanentPercent:
		a.FailPermanent = true
		return a, "failed"
	case n < permanentPercent+failFirstPercent:
		a.FailFirst = true
	}
	return a, "completed"
}

// stepArgs draws a workflow step's arguments (never permanent failures).
func stepArgs(rng *rand.Rand) json.RawMessage {
	a := WorkArgs{SleepMS: minSleepMS + rng.IntN(maxSleepMS-minSleepMS+1), FailFirst: rng.IntN(100) < failFirstPercent}
	b, _ := json.Marshal(a)
	return b
}

// Workflow returns the suite's workflow: a root step fanning out to three
// steps, a fan-in step, a durable delay, and a last step; with
// withOptionalFailure, also an optional step that always fails (the
// execution still completes).
func Workflow(rng *rand.Rand, withOptionalFailure bool) *workflow.Definition {
	task := func() *workflow.TaskSpec { return &workflow.TaskSpec{Type: TaskType, Args: stepArgs(rng)} }
	def := &workflow.Definition{Name: "chaos", Steps: []workflow.Step{{Key: "root", Task: task()}}}
	var fan []string
	for i := 1; i <= fanOut; i++ {
		key := fmt.Sprintf("fan-%d", i)
		fan = append(fan, key)
		def.Steps = append(def.Steps, workflow.Step{Key: key, DependsOn: []string{"root"}, Task: task()})
	}
	def.Steps = append(def.Steps,
		workflow.Step{Key: "join", DependsOn: fan, Task: task()},
		workflow.Step{Key: "pause", DependsOn: []string{"join"}, Delay: &workflow.DelaySpec{Duration: workflow.Duration(workflowDelay)}},
		workflow.Step{Key: "last", DependsOn: []string{"pause"}, Task: task()},
	)
	if withOptionalFailure {
		b, _ := json.Marshal(WorkArgs{SleepMS: 10, FailPermanent: true})
		def.Steps = append(def.Steps, workflow.Step{Key: "optional", DependsOn: []string{"root"}, Optional: true,
			Task: &workflow.TaskSpec{Type: TaskType, Args: b}})
	}
	return def
}

func (p *producer) enqueueTask(ctx context.Context, args WorkArgs, expect string) error {
	return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		res, err := p.jobs.EnqueueTx(ctx, tx, args, nil)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO chaos_expected (kind, task_id, expect) VALUES ('task', $1, $2)`, res.Task.ID, expect)
		return err
	})
}

func (p *producer) startWorkflow(ctx context.Context, def *workflow.Definition) error {
	return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		res, err := p.engine.StartTx(ctx, tx, def)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO chaos_expected (kind, execution_id, expect) VALUES ('workflow', $1, 'completed')`, res.Execution.ID)
		return err
	})
}

// paced calls fn rate times a second until ctx ends. Calls that fall due
// while fn is slow or backing off are skipped, not made up, so an outage
// produces a gap rather than a burst. After a failure it waits with
// exponential backoff (50ms doubling to maxBackoff) before the next call.
func paced(ctx context.Context, rate float64, fn func(ctx context.Context) error) {
	if rate <= 0 {
		return
	}
	interval := time.Duration(float64(time.Second) / rate)
	next := time.Now()
	backoff := time.Duration(0)
	for {
		if wait := time.Until(next); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		if ctx.Err() != nil {
			return
		}
		callCtx, cancel := context.WithTimeout(ctx, enqueueTimeout)
		err := fn(callCtx)
		cancel()
		now := time.Now()
		next = next.Add(interval)
		if err != nil && ctx.Err() == nil {
			backoff = min(max(2*backoff, 50*time.Millisecond), maxBackoff)
			next = now.Add(backoff)
		} else {
			backoff = 0
		}
		if behind := now.Sub(next); behind > time.Second {
			next = now // skip what fell due meanwhile
		}
	}
}

// run produces until ctx ends. seed makes the mix reproducible.
func (p *producer) run(ctx context.Context, rate, workflowRate float64, seed uint64) {
	done := make(chan struct{}, 2)
	go func() {
		defer func() { done <- struct{}{} }()
		rng := rand.New(rand.NewPCG(seed, 1))
		paced(ctx, rate, func(ctx context.Context) error {
			args, expect := randomArgs(rng)
			if err := p.enqueueTask(ctx, args, expect); err != nil {
				p.stats.taskErrors.Add(1)
				p.stats.lastTaskErr.Store(err.Error())
				return err
			}
			p.stats.tasks.Add(1)
			return nil
		})
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		rng := rand.New(rand.NewPCG(seed, 2))
		paced(ctx, workflowRate, func(ctx context.Context) error {
			def := Workflow(rng, rng.IntN(100) < optionalFailShare)
			if err := p.startWorkflow(ctx, def); err != nil {
				p.stats.workflowErrors.Add(1)
				p.stats.lastWorkflowErr.Store(err.Error())
				return err
			}
			p.stats.workflows.Add(1)
			return nil
		})
	}()
	<-done
	<-done
}
