package db_test

import (
	"testing"
	"time"

	"github.com/switchyard/switchyard/db"
)

// testPod returns a registrable pod named id.
func testPod(id string) db.Pod {
	return db.Pod{
		ID:        id,
		Host:      "host-" + id,
		PID:       42,
		Version:   "v1.2.3",
		Queues:    []db.PodQueue{{Name: "default", ExecutorSize: 10, Busy: 3}, {Name: "email", ExecutorSize: 5}},
		StartedAt: time.Now().Add(-time.Minute).Truncate(time.Microsecond),
	}
}

// ageHeartbeat moves pod id's last heartbeat back by ago, as if it had
// stopped heartbeating then.
func (b *testBundle) ageHeartbeat(t *testing.T, id string, ago time.Duration) {
	t.Helper()
	tag, err := b.pool.Exec(t.Context(),
		`UPDATE switchyard_pod SET heartbeat_at = now() - $2::interval WHERE id = $1`, id, ago.String())
	if err != nil {
		t.Fatal(err)
	}
	if tag.RowsAffected() != 1 {
		t.Fatalf("pod %s not registered", id)
	}
}

func alivePods(t *testing.T, q db.Querier, staleAfter time.Duration) []db.Pod {
	t.Helper()
	pods, err := db.PodListAlive(t.Context(), q, staleAfter)
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

func TestPodUpsertKeepsStartedAtAndMovesHeartbeat(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := testPod("pod-a")
	if err := db.PodUpsert(t.Context(), b.pool, first); err != nil {
		t.Fatal(err)
	}
	pods := alivePods(t, b.pool, time.Minute)
	if len(pods) != 1 {
		t.Fatalf("pods = %+v, want pod-a", pods)
	}
	got := pods[0]
	if got.ID != first.ID || got.Host != first.Host || got.PID != first.PID || got.Version != first.Version ||
		!got.StartedAt.Equal(first.StartedAt) || len(got.Queues) != 2 || got.Queues[0] != first.Queues[0] || got.Queues[1] != first.Queues[1] {
		t.Fatalf("registered %+v, read back %+v", first, got)
	}
	// Put the first heartbeat in the past so the second is measurably later
	// without waiting.
	b.ageHeartbeat(t, first.ID, 10*time.Second)
	aged := alivePods(t, b.pool, time.Minute)[0].HeartbeatAt

	second := first
	second.Version = "v1.2.4"
	second.Queues = []db.PodQueue{{Name: "default", ExecutorSize: 10, Busy: 0}}
	second.StartedAt = first.StartedAt.Add(30 * time.Second) // ignored: kept from the insert
	if err := db.PodUpsert(t.Context(), b.pool, second); err != nil {
		t.Fatal(err)
	}
	pods = alivePods(t, b.pool, time.Minute)
	if len(pods) != 1 {
		t.Fatalf("pods after second upsert = %+v, want one row", pods)
	}
	got = pods[0]
	if !got.StartedAt.Equal(first.StartedAt) {
		t.Errorf("started_at = %s, want the first upsert's %s", got.StartedAt, first.StartedAt)
	}
	if !got.HeartbeatAt.After(aged.Add(9 * time.Second)) {
		t.Errorf("heartbeat_at = %s, want about 10s after the aged %s", got.HeartbeatAt, aged)
	}
	if got.Version != "v1.2.4" || len(got.Queues) != 1 || got.Queues[0].Busy != 0 {
		t.Errorf("after second upsert: %+v; want the new version and queues", got)
	}
}

func TestPodListAliveSkipsStalePods(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, id := range []string{"pod-c", "pod-a", "pod-b"} {
		if err := db.PodUpsert(t.Context(), b.pool, testPod(id)); err != nil {
			t.Fatal(err)
		}
	}
	b.ageHeartbeat(t, "pod-b", time.Minute)

	pods := alivePods(t, b.pool, 30*time.Second)
	if len(pods) != 2 || pods[0].ID != "pod-a" || pods[1].ID != "pod-c" {
		t.Fatalf("alive = %+v, want pod-a and pod-c in id order (pod-b is stale)", pods)
	}
	// A longer staleness window still sees it.
	if pods := alivePods(t, b.pool, 2*time.Minute); len(pods) != 3 {
		t.Errorf("alive within 2m = %d pods, want 3", len(pods))
	}
	// The pod heartbeats again: it is alive again.
	if err := db.PodUpsert(t.Context(), b.pool, testPod("pod-b")); err != nil {
		t.Fatal(err)
	}
	if pods := alivePods(t, b.pool, 30*time.Second); len(pods) != 3 {
		t.Errorf("alive after pod-b's heartbeat = %d pods, want 3", len(pods))
	}
}

func TestPodDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, id := range []string{"pod-a", "pod-b"} {
		if err := db.PodUpsert(t.Context(), b.pool, testPod(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.PodDelete(t.Context(), b.pool, "pod-a"); err != nil {
		t.Fatal(err)
	}
	if pods := alivePods(t, b.pool, time.Minute); len(pods) != 1 || pods[0].ID != "pod-b" {
		t.Fatalf("after delete: %+v, want only pod-b", pods)
	}
	// Deregistering twice (shutdown retried, row already gone) is fine.
	if err := db.PodDelete(t.Context(), b.pool, "pod-a"); err != nil {
		t.Errorf("deleting an absent pod: %v, want nil", err)
	}
}

func TestPodUpsertNilQueues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := testPod("pod-a")
	p.Queues = nil
	if err := db.PodUpsert(t.Context(), b.pool, p); err != nil {
		t.Fatal(err)
	}
	if pods := alivePods(t, b.pool, time.Minute); len(pods) != 1 || pods[0].Queues == nil || len(pods[0].Queues) != 0 {
		t.Errorf("pods = %+v, want one pod with an empty queue list", pods)
	}
}
