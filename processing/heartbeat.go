package processing

import (
	"context"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/db"
)

// heartbeatWriteTimeout bounds each write to switchyard_pod, so a hung
// Postgres delays one heartbeat instead of stalling the loop, or Stop, for
// good.
const heartbeatWriteTimeout = 5 * time.Second

// busyCounts is the number of handlers running now, per queue: what the
// heartbeat reports as busy. The map is built in New from the configured
// queues and never changes afterwards, so lookups need no lock.
type busyCounts map[string]*atomic.Int64

func newBusyCounts(queues map[string]int) busyCounts {
	b := make(busyCounts, len(queues))
	for q := range queues {
		b[q] = new(atomic.Int64)
	}
	return b
}

// add changes queue's count by delta. River only hands a pod tasks of its
// own queues, so the lookup always hits; a miss is ignored rather than
// panicking inside a worker.
func (b busyCounts) add(queue string, delta int64) {
	if n := b[queue]; n != nil {
		n.Add(delta)
	}
}

// podQueues returns this pod's queues, sorted by name, with their executor
// sizes and busy counts as of now.
func (s *Service) podQueues() []db.PodQueue {
	qs := make([]db.PodQueue, 0, len(s.cfg.Queues))
	for name, size := range s.cfg.Queues {
		var busy int
		if n := s.busy[name]; n != nil {
			busy = int(n.Load())
		}
		qs = append(qs, db.PodQueue{Name: name, ExecutorSize: size, Busy: busy})
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].Name < qs[j].Name })
	return qs
}

// stoppedNotifier is what the heartbeater needs of the River client: a
// channel closed once it has stopped working, valid after its Start.
type stoppedNotifier interface {
	Stopped() <-chan struct{}
}

// heartbeatConfig configures a heartbeater.
type heartbeatConfig struct {
	// Interval is the time between two heartbeats.
	Interval time.Duration
	// ID is the pod's id in switchyard_pod: the River client ID, which
	// River records in river_job.attempted_by, so a rescuer can tell whose
	// in-progress tasks belong to a dead pod.
	ID string
	// Version is the build version the pod registers with.
	Version string
}

// heartbeater registers this pod in switchyard_pod and refreshes its row
// (queues with busy counts, heartbeat_at) every interval, so operators can
// list the live pods and a rescuer can tell a dead pod by its stale row. It
// deletes the row when it stops.
//
// Heartbeats are advisory: a failed one (Postgres down) is logged and the
// next tick tries again; nothing in the pod depends on them succeeding.
type heartbeater struct {
	cfg    heartbeatConfig
	conn   db.DBTX
	worker stoppedNotifier
	queues func() []db.PodQueue
	logger *slog.Logger
	host   string
	pid    int

	mu        sync.Mutex
	startedAt time.Time
	cancel    context.CancelFunc // non-nil from Start until Stop
	done      chan struct{}      // closed when the loop has returned
	// healthy is when the current run of successful heartbeats began:
	// nil before the first success and after any failure. The rescuer
	// reads it (healthyFor).
	healthy atomic.Pointer[time.Time]
	// failures counts consecutive failed heartbeats, so recovery is
	// logged once. Only the goroutine running beat touches it: Start's
	// first beat happens before the loop starts, and Stop waits for the
	// loop before a later Start.
	failures int
}

// newHeartbeater returns a heartbeater for the pod cfg.ID, writing through
// q. worker is the River client whose lifetime bounds the heartbeats;
// queues reports the pod's queues at each heartbeat.
func newHeartbeater(cfg heartbeatConfig, q db.DBTX, worker stoppedNotifier, queues func() []db.PodQueue, logger *slog.Logger) *heartbeater {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return &heartbeater{
		cfg:    cfg,
		conn:   q,
		worker: worker,
		queues: queues,
		logger: logger.With("component", "heartbeat", "pod_id", cfg.ID),
		host:   host,
		pid:    os.Getpid(),
	}
}

// Start registers the pod with a first heartbeat, synchronously, so the pod
// is listed when Start returns (unless that write failed: it is logged and
// retried at the next tick), then heartbeats every interval until Stop or
// until River has stopped. Call it after River's Start. Starting a running
// heartbeater does nothing. It never fails: heartbeats never stop a pod.
//
// The heartbeats outlive ctx on purpose. Cancelling the context given to
// Service.Start makes River drain running handlers for up to
// ShutdownTimeout, and the pod must look alive until they are done, or a
// rescuer would hand its tasks to another pod while they still run. So the
// loop runs on ctx's values without its cancellation and watches River's
// Stopped channel instead.
func (h *heartbeater) Start(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done != nil {
		select {
		case <-h.done:
			// The loop ended by itself because River stopped without
			// Stop; River can be started again, and so can we.
			h.cancel()
		default:
			return nil
		}
	}
	h.startedAt = time.Now()
	h.beat(ctx)
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.cancel, h.done = cancel, make(chan struct{})
	go h.run(loopCtx, h.worker.Stopped(), h.done)
	return nil
}

// register writes the pod's row once, before River starts claiming.
func (h *heartbeater) register(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.startedAt = time.Now()
	h.beat(ctx)
}

// Stop ends the heartbeats and deletes the pod's row. Call it once River
// has stopped, so no handler of this pod runs any more: a row deleted
// earlier would make the pod's running tasks look abandoned. The delete
// runs even if ctx is done (bounded by its own timeout), so a shutdown
// whose deadline has passed still deregisters; a failed delete is logged
// and the row goes stale. Stop returns an error only if ctx ends before
// the loop has returned; it may then be called again.
func (h *heartbeater) Stop(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done == nil {
		return nil // never started, or already stopped
	}
	h.cancel()
	select {
	case <-h.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	h.cancel, h.done = nil, nil
	h.deregister(ctx)
	return nil
}

// run heartbeats every interval until ctx is cancelled (Stop) or River
// has stopped, then closes done.
func (h *heartbeater) run(ctx context.Context, riverStopped <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	ticker := time.NewTicker(h.cfg.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-riverStopped:
			// River stopped without our Stop (Start's context was
			// cancelled): no handler runs any more, so the pod leaves
			// the registry as on a clean shutdown.
			h.deregister(ctx)
			return
		case <-ticker.C:
			h.beat(ctx)
		}
	}
}

// beat writes one heartbeat.
func (h *heartbeater) beat(ctx context.Context) {
	writeCtx, cancel := context.WithTimeout(ctx, heartbeatWriteTimeout)
	defer cancel()
	err := db.PodUpsert(writeCtx, h.conn, db.Pod{
		ID:        h.cfg.ID,
		Host:      h.host,
		PID:       h.pid,
		Version:   h.cfg.Version,
		Queues:    h.queues(),
		StartedAt: h.startedAt,
	})
	switch {
	case err != nil && ctx.Err() != nil:
		// Stopping mid-write: not a failure worth a warning.
	case err != nil:
		h.healthy.Store(nil)
		h.failures++
		h.logger.Warn("heartbeat failed; retrying at the next interval", "failures", h.failures, "err", err)
	case h.failures > 0:
		h.logger.Info("heartbeat recovered", "failures", h.failures)
		h.failures = 0
	}
	if err == nil && h.healthy.Load() == nil {
		now := time.Now()
		h.healthy.Store(&now)
	}
}

// healthyFor is how long this pod's heartbeats have been succeeding
// without a failure in between; zero before the first success and while
// they fail.
func (h *heartbeater) healthyFor() time.Duration {
	since := h.healthy.Load()
	if since == nil {
		return 0
	}
	return time.Since(*since)
}

// deregister deletes the pod's row, even when ctx is done.
func (h *heartbeater) deregister(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), heartbeatWriteTimeout)
	defer cancel()
	if err := db.PodDelete(ctx, h.conn, h.cfg.ID); err != nil {
		h.logger.Warn("deregister pod failed; its row will go stale", "err", err)
	}
}
