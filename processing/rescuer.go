package processing

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/switchyard/switchyard/db"
	"github.com/switchyard/switchyard/metrics"
)

// rescuer returns the in-progress tasks of dead pods to the queue: a pod is
// dead when its heartbeat is older than RescueAfter. Every pod runs one;
// their updates are fenced on the claim, so they never step on each other
// or on a task that moved on. River's own rescuer (after an hour) stays as
// a backstop.
//
// A pod that was itself cut off from Postgres cannot tell a dead pod from
// one that was cut off with it: after an outage longer than RescueAfter
// every pod's heartbeat is stale, and rescuing then would hand every task
// in flight to a second run. So the rescuer holds its passes until its own
// pod's heartbeats have been succeeding for RescueAfter (healthyFor), by
// which time every live pod has heartbeated again. The same hold applies
// when the pod starts.
type rescuer struct {
	conn       db.DBTX
	interval   time.Duration
	after      time.Duration
	healthyFor func() time.Duration // nil: never hold
	metrics    *metrics.Metrics
	logger     *slog.Logger
	held       bool // the last pass was held; only the run goroutine uses it

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// rescueBatch bounds one pass, so a mass failure is worked off in steps
// without a long transaction.
const rescueBatch = 1000

func newRescuer(conn db.DBTX, interval, after time.Duration, healthyFor func() time.Duration, m *metrics.Metrics, logger *slog.Logger) *rescuer {
	return &rescuer{conn: conn, interval: interval, after: after, healthyFor: healthyFor, metrics: m, logger: logger.With("component", "rescuer")}
}

// Start runs passes every interval until Stop.
func (r *rescuer) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done != nil {
		return nil
	}
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel, r.done = cancel, make(chan struct{})
	go r.run(loopCtx, r.done)
	return nil
}

// Stop ends the loop and waits for a pass in progress.
func (r *rescuer) Stop(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done == nil {
		return nil
	}
	r.cancel()
	select {
	case <-r.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.cancel, r.done = nil, nil
	return nil
}

func (r *rescuer) run(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	ticker := time.NewTicker(r.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			r.pass(ctx)
		}
	}
}

// pass rescues abandoned tasks until none is left (or an error), unless
// this pod's own heartbeats have not been succeeding for RescueAfter.
func (r *rescuer) pass(ctx context.Context) {
	if r.healthyFor != nil {
		healthy := r.healthyFor()
		if healthy < r.after {
			if !r.held && healthy == 0 {
				r.logger.Info("rescue held: this pod's heartbeats are failing, so other pods' stale heartbeats prove nothing",
					"resumes_after", r.after)
				r.held = true
			}
			return
		}
		if r.held {
			r.logger.Info("rescue resumed: this pod's heartbeats have succeeded for the rescue-after period", "rescue_after", r.after)
			r.held = false
		}
	}
	for {
		passCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		rescued, err := db.JobRescueAbandoned(passCtx, r.conn, r.after, rescueBatch)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				r.logger.Warn("rescue pass failed; retrying at the next interval", "err", err)
			}
			return
		}
		for _, j := range rescued {
			state := "queued"
			if j.State == "discarded" {
				state = "failed"
			}
			r.metrics.RescuedTasks.WithLabelValues(j.Queue, state).Inc()
			r.logger.Info("rescued task of a dead pod", "task_id", j.ID, "type", j.Kind, "queue", j.Queue,
				"attempt", j.Attempt, "pod", j.Pod, "now", state)
		}
		if len(rescued) < rescueBatch {
			return
		}
	}
}
