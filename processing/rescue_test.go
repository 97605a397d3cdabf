package processing

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard/switchyard/db"
	"github.com/switchyard/switchyard/dbtest"
	"github.com/switchyard/switchyard/handlers"
	"github.com/switchyard/switchyard/jobs"
	"github.com/switchyard/switchyard/metrics"
)

// The rescue test runs a worker pod as a real second process (this test
// binary re-executed) and kills it with SIGKILL while it runs a task.
const helperEnv = "SWITCHYARD_RESCUE_HELPER_DB"

func TestMain(m *testing.M) {
	if url := os.Getenv(helperEnv); url != "" {
		if err := runHelperPod(url, os.Getenv("SWITCHYARD_RESCUE_HELPER_PREFIX")); err != nil {
			fmt.Fprintln(os.Stderr, "helper pod:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

// runHelperPod works test.task with a handler that announces the task and
// then blocks until the process dies.
func runHelperPod(url, prefix string) error {
	ctx := context.Background()
	pool, err := db.NewPool(ctx, db.PoolConfig{URL: url})
	if err != nil {
		return err
	}
	registry := jobs.NewRegistry()
	if err := jobs.Register[testArgs](registry, jobs.TypeConfig{}); err != nil {
		return err
	}
	mux := handlers.NewMux()
	mux.HandleFunc("test.task", func(ctx context.Context, task *jobs.Task) (any, error) {
		fmt.Printf("running %d\n", task.ID)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	m, err := metrics.New(prometheus.NewRegistry(), "helper")
	if err != nil {
		return err
	}
	redisURL := os.Getenv(dbtest.RedisURLEnv)
	if redisURL == "" {
		redisURL = "redis://127.0.0.1:56379/0"
	}
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return err
	}
	svc, err := New(Config{ID: "helper-pod", HeartbeatInterval: 200 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond,
		Guard: GuardConfig{KeyPrefix: prefix, TTL: 3 * time.Second}},
		Deps{Pool: pool, Redis: redis.NewClient(opts), Registry: registry, Handlers: mux, Metrics: m})
	if err != nil {
		return err
	}
	if err := svc.Start(ctx); err != nil {
		return err
	}
	fmt.Println("started")
	select {} // until SIGKILL
}

func TestRescueTaskOfKilledPod(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})

	task := b.enqueue(t, nil)
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), helperEnv+"="+b.url, "SWITCHYARD_RESCUE_HELPER_PREFIX="+b.prefix)
	helper.Stderr = os.Stderr
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = helper.Process.Kill(); _ = helper.Wait() })
	lines := bufio.NewScanner(out)
	want := fmt.Sprintf("running %d", task.ID)
	for lines.Scan() && lines.Text() != want {
	}
	if lines.Err() != nil {
		t.Fatal(lines.Err())
	}

	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	killed := time.Now()
	if got, _ := b.client.Get(t.Context(), task.ID); got.State != jobs.StateInProgress {
		t.Fatalf("after the kill the task is %s, want in_progress (claimed by the dead pod)", got.State)
	}

	reran := make(chan time.Time, 1)
	b.startService(t, handlers.HandlerFunc(func(ctx context.Context, tk *jobs.Task) (any, error) {
		reran <- time.Now()
		return "rescued", nil
	}), func(c *Config) {
		c.HeartbeatInterval, c.RescueInterval, c.RescueAfter = 200*time.Millisecond, 100*time.Millisecond, time.Second
		// The dead pod's guard lock expires with its TTL (3s).
		c.Guard.ContendedSnooze = 200 * time.Millisecond
	}, nil)

	var at time.Time
	select {
	case at = <-reran:
	case <-time.After(30 * time.Second):
		t.Fatal("the killed pod's task was not run again within 30s")
	}
	t.Logf("killed pod's task ran again %s after SIGKILL (rescue after 1s, guard TTL 3s)", at.Sub(killed).Round(time.Millisecond))
	done := b.waitState(t, task.ID, jobs.StateCompleted)
	if done.Attempt != 2 || len(done.Errors) != 1 || !strings.Contains(done.Errors[0].Error, "rescued: pod helper-pod") {
		t.Errorf("attempt %d errors %+v; want attempt 2 and the rescue recorded", done.Attempt, done.Errors)
	}
	if v := counterValue(t, b.metrics.RescuedTasks.WithLabelValues("default", "queued")); v != 1 {
		t.Errorf("rescued counter = %v, want 1", v)
	}
}

// TestRescueIsFenced races a rescue against a late completion: whichever
// comes first, the other changes nothing.
func TestRescueIsFenced(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	claim := func() db.Claim {
		task := b.enqueue(t, nil)
		var c db.Claim
		if err := b.pool.QueryRow(t.Context(), `UPDATE river_job SET state = 'running', attempt = 1,
			attempted_at = now() - interval '1 minute', attempted_by = '{dead-pod}'
			WHERE id = $1 RETURNING id, attempt, attempted_at`, task.ID).Scan(&c.ID, &c.Attempt, &c.AttemptedAt); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// Completion first, then the rescue: the rescue finds nothing.
	first := claim()
	if ok, err := db.JobCompleteIfClaimed(t.Context(), b.pool, first, nil); err != nil || !ok {
		t.Fatalf("complete: %v %v", ok, err)
	}
	if rescued, err := db.JobRescueAbandoned(t.Context(), b.pool, time.Second, 10); err != nil || len(rescued) != 0 {
		t.Fatalf("rescue after completion: %v %v", rescued, err)
	}
	// Rescue first, then the late completion: the completion is stale.
	second := claim()
	if rescued, err := db.JobRescueAbandoned(t.Context(), b.pool, time.Second, 10); err != nil || len(rescued) != 1 {
		t.Fatalf("rescue: %v %v", rescued, err)
	}
	if ok, err := db.JobCompleteIfClaimed(t.Context(), b.pool, second, nil); err != nil || ok {
		t.Fatalf("late completion after the rescue: ok=%v err=%v; want a fence miss", ok, err)
	}
	got, _ := b.client.Get(t.Context(), second.ID)
	if got.State != jobs.StateQueued {
		t.Errorf("state after rescue and late completion: %s, want queued", got.State)
	}
	// A pod with a fresh heartbeat keeps its tasks.
	live := claim()
	if err := db.PodUpsert(t.Context(), b.pool, db.Pod{ID: "live-pod", StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.pool.Exec(t.Context(), `UPDATE river_job SET attempted_by = '{live-pod}' WHERE id = $1`, live.ID); err != nil {
		t.Fatal(err)
	}
	if rescued, err := db.JobRescueAbandoned(t.Context(), b.pool, time.Second, 10); err != nil || len(rescued) != 0 {
		t.Errorf("rescue of a live pod's task: %v %v", rescued, err)
	}
}
