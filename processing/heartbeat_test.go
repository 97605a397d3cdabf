package processing

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard/switchyard/db"
	"github.com/switchyard/switchyard/handlers"
	"github.com/switchyard/switchyard/jobs"
)

// podStaleAfter is generous next to the tests' 50ms heartbeats, so a slow
// CI machine never makes a live pod look dead.
const podStaleAfter = time.Minute

func listPods(t *testing.T, b *testBundle) []db.Pod {
	t.Helper()
	pods, err := db.PodListAlive(t.Context(), b.pool, podStaleAfter)
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// waitForPods polls the live pods until cond holds or 15 seconds pass.
func waitForPods(t *testing.T, b *testBundle, what string, cond func([]db.Pod) bool) []db.Pod {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		pods := listPods(t, b)
		if cond(pods) {
			return pods
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; pods %+v", what, pods)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// busyOf returns the busy count of queue in the only pod, or -1.
func busyOf(pods []db.Pod, queue string) int {
	if len(pods) != 1 {
		return -1
	}
	for _, q := range pods[0].Queues {
		if q.Name == queue {
			return q.Busy
		}
	}
	return -1
}

// ageHeartbeat moves pod id's heartbeat an hour back, so only a heartbeat
// written afterwards lists it again.
func ageHeartbeat(t *testing.T, b *testBundle, id string) {
	t.Helper()
	if _, err := b.pool.Exec(t.Context(), `UPDATE switchyard_pod SET heartbeat_at = now() - interval '1 hour' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
}

// blocking returns a handler that signals started and then waits for
// release (or its context).
func blocking() (h handlers.Handler, started chan struct{}, release chan struct{}) {
	started, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	return handlers.HandlerFunc(func(ctx context.Context, task *jobs.Task) (any, error) {
		once.Do(func() { close(started) })
		select {
		case <-release:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}), started, release
}

// newPodService builds, without starting, a Service with id and 50ms
// heartbeats working the default queue with h.
func (b *testBundle) newPodService(t *testing.T, id string, h handlers.Handler, logger *slog.Logger) *Service {
	t.Helper()
	mux := handlers.NewMux()
	mux.Handle(testArgs{}.TaskType(), h)
	svc, err := New(Config{
		ID:                id,
		Queues:            map[string]int{"default": 5},
		Guard:             GuardConfig{KeyPrefix: b.prefix},
		FetchPollInterval: 50 * time.Millisecond,
		ShutdownTimeout:   10 * time.Second,
		HeartbeatInterval: 50 * time.Millisecond,
	}, Deps{Pool: b.pool, Redis: b.rdb, Registry: b.registry, Handlers: mux, Metrics: b.metrics, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := svc.Stop(ctx); err != nil {
			t.Errorf("stop service: %v", err)
		}
	})
	return svc
}

func TestHeartbeatRegistersReportsBusyAndDeregisters(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	h, started, release := blocking()
	before := time.Now()
	svc := b.startService(t, h, func(c *Config) {
		c.ID = "pod-1"
		c.Version = "v9.9.9"
		c.Queues = map[string]int{"default": 5, "email": 2}
		c.HeartbeatInterval = 50 * time.Millisecond
	}, nil)

	// Listed as soon as Start returns: no waiting.
	pods := listPods(t, b)
	if len(pods) != 1 {
		t.Fatalf("pods after Start = %+v, want one", pods)
	}
	p := pods[0]
	host, _ := os.Hostname()
	if p.ID != "pod-1" || p.Host != host || p.PID != os.Getpid() || p.Version != "v9.9.9" {
		t.Errorf("pod = %+v; want id pod-1, host %s, pid %d, version v9.9.9", p, host, os.Getpid())
	}
	want := []db.PodQueue{{Name: "default", ExecutorSize: 5}, {Name: "email", ExecutorSize: 2}}
	if len(p.Queues) != 2 || p.Queues[0] != want[0] || p.Queues[1] != want[1] {
		t.Errorf("queues = %+v, want %+v", p.Queues, want)
	}
	if p.StartedAt.Before(before.Add(-time.Second)) || p.StartedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("started_at = %s, want about %s", p.StartedAt, before)
	}

	// A running handler shows in a later heartbeat, and leaves again.
	b.enqueue(t, nil)
	<-started
	waitForPods(t, b, "busy 1 on default", func(pods []db.Pod) bool { return busyOf(pods, "default") == 1 })
	close(release)
	pods = waitForPods(t, b, "busy 0 on default", func(pods []db.Pod) bool { return busyOf(pods, "default") == 0 })
	if !pods[0].StartedAt.Equal(p.StartedAt) {
		t.Errorf("started_at moved from %s to %s", p.StartedAt, pods[0].StartedAt)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := svc.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// Gone as soon as Stop returns, even with a staleness window that would
	// still list a pod that merely stopped heartbeating.
	if pods := listPods(t, b); len(pods) != 0 {
		t.Errorf("pods after Stop = %+v, want none", pods)
	}
}

func TestHeartbeatTwoServicesTwoPods(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	var svcs []*Service
	for _, id := range []string{"pod-b", "pod-a"} {
		svcs = append(svcs, b.startService(t, handlers.HandlerFunc(ok), func(c *Config) { c.ID = id }, nil))
	}
	pods := listPods(t, b)
	if len(pods) != 2 || pods[0].ID != "pod-a" || pods[1].ID != "pod-b" {
		t.Fatalf("pods = %+v, want pod-a and pod-b, in id order", pods)
	}
	if err := svcs[0].Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if pods := listPods(t, b); len(pods) != 1 || pods[0].ID != "pod-a" {
		t.Errorf("pods after stopping pod-b = %+v, want only pod-a", pods)
	}
}

// TestHeartbeatOutlivesStartContext is a SIGTERM in serve: Start's context
// is cancelled and River drains the running handler. The pod must keep
// heartbeating until the handler is done (or a rescuer would take its task)
// and leave the registry once River has stopped, without Stop.
func TestHeartbeatOutlivesStartContext(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	h, started, release := blocking()
	svc := b.newPodService(t, "pod-1", h, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	task := b.enqueue(t, nil)
	<-started

	cancel()
	ageHeartbeat(t, b, "pod-1")
	waitForPods(t, b, "a heartbeat after Start's context was cancelled", func(pods []db.Pod) bool {
		return busyOf(pods, "default") == 1
	})

	close(release)
	waitForPods(t, b, "deregistration once River stopped", func(pods []db.Pod) bool { return len(pods) == 0 })
	if got := b.waitState(t, task.ID, jobs.StateCompleted); got.Attempt != 1 {
		t.Errorf("drained task: attempt %d, want 1", got.Attempt)
	}
}

// TestHeartbeatSurvivesFailures makes heartbeats fail (the table is
// renamed away) and checks that the pod carries on working, warns, and
// heartbeats again once the table is back.
func TestHeartbeatSurvivesFailures(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	logs := &syncBuffer{}
	svc := b.newPodService(t, "pod-1", handlers.HandlerFunc(ok), slog.New(slog.NewTextHandler(logs, nil)))
	if err := svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(t.Context(), `ALTER TABLE switchyard_pod RENAME TO switchyard_pod_away`); err != nil {
		t.Fatal(err)
	}
	waitForLog(t, logs, "heartbeat failed")
	// Tasks still run while heartbeats fail.
	b.waitState(t, b.enqueue(t, nil).ID, jobs.StateCompleted)

	if _, err := b.pool.Exec(t.Context(), `ALTER TABLE switchyard_pod_away RENAME TO switchyard_pod`); err != nil {
		t.Fatal(err)
	}
	ageHeartbeat(t, b, "pod-1")
	waitForPods(t, b, "a heartbeat after recovery", func(pods []db.Pod) bool { return len(pods) == 1 })
	waitForLog(t, logs, "heartbeat recovered")
}

func TestHeartbeatConfig(t *testing.T) {
	t.Parallel()
	cfg := Config{}.WithDefaults()
	if cfg.HeartbeatInterval != DefaultHeartbeatInterval || cfg.Version != "dev" {
		t.Errorf("defaults: interval %s, version %q; want %s, dev", cfg.HeartbeatInterval, cfg.Version, DefaultHeartbeatInterval)
	}
	if err := (Config{HeartbeatInterval: time.Millisecond}).WithDefaults().validate(); err == nil {
		t.Error("a 1ms heartbeat interval must be rejected")
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitForLog polls logs until it contains msg or 15 seconds pass.
func waitForLog(t *testing.T, logs *syncBuffer, msg string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(logs.String(), msg) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for log %q; logs:\n%s", msg, logs)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
