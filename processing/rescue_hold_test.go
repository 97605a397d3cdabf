package processing

import (
	"log/slog"
	"testing"
	"time"

	"github.com/switchyard/switchyard/db"
	"github.com/switchyard/switchyard/jobs"
)

// A rescuer whose own pod could not reach Postgres until lately holds its
// passes: after an outage every heartbeat is stale, live pods' too (found
// by the chaos suite: a 6s Postgres outage had every task in flight
// rescued and run twice).
func TestRescueHeldUntilOwnHeartbeatsRecover(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	task := b.enqueue(t, nil)
	if _, err := b.pool.Exec(t.Context(), `UPDATE river_job SET state = 'running', attempt = 1,
		attempted_at = now() - interval '1 minute', attempted_by = '{cut-off-pod}' WHERE id = $1`, task.ID); err != nil {
		t.Fatal(err)
	}
	var healthy time.Duration
	r := newRescuer(b.pool, time.Second, 3*time.Second, func() time.Duration { return healthy }, b.metrics, slog.New(slog.DiscardHandler))

	for _, h := range []time.Duration{0, 2 * time.Second} { // failing; recovered, but not for RescueAfter yet
		healthy = h
		r.pass(t.Context())
		if got, _ := b.client.Get(t.Context(), task.ID); got.State != jobs.StateInProgress {
			t.Fatalf("healthy for %s: the task was rescued (%s)", h, got.State)
		}
	}
	healthy = 3 * time.Second
	r.pass(t.Context())
	if got, _ := b.client.Get(t.Context(), task.ID); got.State != jobs.StateQueued {
		t.Fatalf("healthy for RescueAfter: task is %s, want queued (rescued)", got.State)
	}
}

// healthyFor counts from the first successful heartbeat after the last
// failed one.
func TestHeartbeaterHealthyFor(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	h := newHeartbeater(heartbeatConfig{Interval: time.Second, ID: "pod-h"}, b.pool, nil,
		func() []db.PodQueue { return nil }, slog.New(slog.DiscardHandler))
	if h.healthyFor() != 0 {
		t.Fatal("healthy before any heartbeat")
	}
	h.beat(t.Context())
	first := h.healthy.Load()
	if first == nil {
		t.Fatal("not healthy after a heartbeat")
	}
	h.beat(t.Context())
	if h.healthy.Load() != first {
		t.Error("a second good heartbeat restarted the healthy period")
	}
	if _, err := b.pool.Exec(t.Context(), `ALTER TABLE switchyard_pod RENAME TO switchyard_pod_away`); err != nil {
		t.Fatal(err)
	}
	h.beat(t.Context())
	if h.healthyFor() != 0 {
		t.Error("healthy after a failed heartbeat")
	}
	if _, err := b.pool.Exec(t.Context(), `ALTER TABLE switchyard_pod_away RENAME TO switchyard_pod`); err != nil {
		t.Fatal(err)
	}
	h.beat(t.Context())
	if got := h.healthy.Load(); got == nil || !got.After(*first) {
		t.Errorf("healthy period after recovery starts at %v, want after %v", got, *first)
	}
}
