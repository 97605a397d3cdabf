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
type rescuer struct {
	conn     db.DBTX
	interval time.Duration
	after    time.Duration
	metrics  *metrics.Metrics
	logger   *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// rescueBatch bounds one pass, so a mass failure is worked off in steps
// without a long transaction.
const rescueBatch = 1000

func newRescuer(conn db.DBTX, interval, after time.Duration, m *metrics.Metrics, logger *slog.Logger) *rescuer {
	return &rescuer{conn: conn, interval: interval, after: after, metrics: m, logger: logger.With("component", "rescuer")}
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

// pass rescues abandoned tasks until none is left (or an error).
func (r *rescuer) pass(ctx context.Context) {
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
