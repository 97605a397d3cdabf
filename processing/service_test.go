package processing

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard/switchyard/dbtest"
	"github.com/switchyard/switchyard/handlers"
	"github.com/switchyard/switchyard/jobs"
	"github.com/switchyard/switchyard/metrics"
)

// testArgs is the task type of these tests; every test registers its own
// handler for it.
type testArgs struct {
	N int `json:"n"`
}

func (testArgs) TaskType() string { return "test.task" }

type testBundle struct {
	url      string // the test database, for helper processes
	pool     *pgxpool.Pool
	rdb      *redis.Client
	prefix   string
	registry *jobs.Registry
	client   *jobs.Client
	metrics  *metrics.Metrics
}

type setupOpts struct {
	typeConfig jobs.TypeConfig
}

// setup prepares a fresh database, a Redis key namespace and the task type;
// services are started with startService.
func setup(t *testing.T, opts setupOpts) *testBundle {
	t.Helper()
	url := dbtest.NewDatabase(t)
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // before the database is dropped
	registry := jobs.NewRegistry()
	cfg := opts.typeConfig
	if cfg.Retry.InitialBackoff == 0 {
		cfg.Retry.InitialBackoff = 10 * time.Millisecond
		cfg.Retry.Jitter = 0
	}
	if err := jobs.Register[testArgs](registry, cfg); err != nil {
		t.Fatal(err)
	}
	client, err := jobs.NewInsertOnlyClient(pool, registry)
	if err != nil {
		t.Fatal(err)
	}
	m, err := metrics.New(prometheus.NewRegistry(), "test")
	if err != nil {
		t.Fatal(err)
	}
	return &testBundle{url: url, pool: pool, rdb: dbtest.Redis(t), prefix: dbtest.KeyPrefix(t), registry: registry, client: client, metrics: m}
}

// startService starts a Service working the default queue with h, stopped
// at cleanup. mod adjusts the config; rdb overrides the Redis client.
func (b *testBundle) startService(t *testing.T, h handlers.Handler, mod func(*Config), rdb redis.UniversalClient) *Service {
	t.Helper()
	mux := handlers.NewMux()
	mux.Handle(testArgs{}.TaskType(), h)
	cfg := Config{
		Queues:            map[string]int{"default": 5},
		Guard:             GuardConfig{KeyPrefix: b.prefix, ContendedSnooze: 20 * time.Millisecond, UnavailableSnooze: 20 * time.Millisecond},
		FetchPollInterval: 50 * time.Millisecond,
		ShutdownTimeout:   5 * time.Second,
	}
	if mod != nil {
		mod(&cfg)
	}
	if rdb == nil {
		rdb = b.rdb
	}
	svc, err := New(cfg, Deps{Pool: b.pool, Redis: rdb, Registry: b.registry, Handlers: mux, Metrics: b.metrics})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(t.Context()); err != nil {
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

func (b *testBundle) enqueue(t *testing.T, opts *jobs.EnqueueOptions) *jobs.Task {
	t.Helper()
	res, err := b.client.Enqueue(t.Context(), testArgs{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res.Task
}

// waitFor polls the task until cond holds or 15 seconds pass.
func (b *testBundle) waitFor(t *testing.T, id int64, what string, cond func(*jobs.Task) bool) *jobs.Task {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		task, err := b.client.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if cond(task) {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %d: timed out waiting for %s; last state %s attempt %d errors %+v", id, what, task.State, task.Attempt, task.Errors)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (b *testBundle) waitState(t *testing.T, id int64, state jobs.State) *jobs.Task {
	t.Helper()
	return b.waitFor(t, id, string(state), func(task *jobs.Task) bool { return task.State == state })
}

func counterValue(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

func ok(context.Context, *jobs.Task) (any, error) { return map[string]string{"ok": "yes"}, nil }

func TestCompletesWithOutput(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.startService(t, handlers.HandlerFunc(ok), nil, nil)
	task := b.waitState(t, b.enqueue(t, nil).ID, jobs.StateCompleted)
	var out map[string]string
	if err := json.Unmarshal(task.Output, &out); err != nil || out["ok"] != "yes" {
		t.Errorf("output = %s", task.Output)
	}
	if got := counterValue(t, b.metrics.TasksTotal.WithLabelValues("test.task", "default", "completed")); got != 1 {
		t.Errorf("completed counter = %v, want 1", got)
	}
	if got := counterValue(t, b.metrics.GuardResults.WithLabelValues("obtained")); got != 1 {
		t.Errorf("guard obtained = %v, want 1", got)
	}
}

func TestClaimExclusivity(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	const n = 300
	var mu sync.Mutex
	runs := map[int64]int{}
	h := handlers.HandlerFunc(func(ctx context.Context, task *jobs.Task) (any, error) {
		mu.Lock()
		runs[task.ID]++
		mu.Unlock()
		return nil, nil
	})
	params := make([]jobs.EnqueueParams, n)
	for i := range params {
		params[i] = jobs.EnqueueParams{Args: testArgs{N: i}}
	}
	res, err := b.client.EnqueueMany(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	// Three pods on one database and one Redis.
	for range 3 {
		b.startService(t, h, func(c *Config) { c.Queues = map[string]int{"default": 10} }, nil)
	}
	for _, r := range res {
		b.waitState(t, r.Task.ID, jobs.StateCompleted)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != n {
		t.Fatalf("%d distinct tasks ran, want %d", len(runs), n)
	}
	for id, c := range runs {
		if c != 1 {
			t.Errorf("task %d ran %d times", id, c)
		}
	}
}

func TestGuardContentionSnoozes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	task := b.enqueue(t, nil)
	// A zombie run of the same task holds the lock.
	lock, err := redislock.New(b.rdb).Obtain(t.Context(), b.prefix+"task:"+strconv.FormatInt(task.ID, 10), time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int32
	b.startService(t, handlers.HandlerFunc(func(ctx context.Context, task *jobs.Task) (any, error) {
		ran.Add(1)
		return nil, nil
	}), nil, nil)

	snoozed := b.waitFor(t, task.ID, "a snooze", func(tk *jobs.Task) bool { return tk.Snoozes >= 2 })
	if ran.Load() != 0 {
		t.Fatalf("handler ran %d times while the lock was held", ran.Load())
	}
	if snoozed.State.Final() || len(snoozed.Errors) != 0 {
		t.Fatalf("contended task: state %s errors %v; want not final, no errors", snoozed.State, snoozed.Errors)
	}
	if err := lock.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	done := b.waitState(t, task.ID, jobs.StateCompleted)
	if ran.Load() != 1 || done.Attempt != 1 {
		t.Errorf("after release: ran %d times, attempt %d; want 1, 1 (snoozes use no attempt)", ran.Load(), done.Attempt)
	}
	if got := counterValue(t, b.metrics.GuardResults.WithLabelValues("contended")); got < 2 {
		t.Errorf("guard contended = %v, want >= 2", got)
	}
}

// deadRedis is a real client pointed at a port nothing listens on.
func deadRedis(t *testing.T) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestRedisDownBestEffortRuns(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.startService(t, handlers.HandlerFunc(ok), func(c *Config) { c.Guard.BreakerThreshold = 2 }, deadRedis(t))
	var ids []int64
	for range 5 {
		ids = append(ids, b.enqueue(t, nil).ID)
	}
	for _, id := range ids {
		b.waitState(t, id, jobs.StateCompleted)
	}
	if got := counterValue(t, b.metrics.GuardResults.WithLabelValues("unavailable")); got != 5 {
		t.Errorf("guard unavailable = %v, want 5", got)
	}
	// Two failures opened the breaker; the later tasks skipped Redis.
	if got := counterValue(t, b.metrics.GuardCircuitOpen); got != 1 {
		t.Errorf("circuit open gauge = %v, want 1", got)
	}
}

func TestRedisDownStrictSnoozes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	var ran atomic.Int32
	b.startService(t, handlers.HandlerFunc(func(ctx context.Context, task *jobs.Task) (any, error) {
		ran.Add(1)
		return nil, nil
	}), func(c *Config) { c.Guard.Mode = GuardStrict }, deadRedis(t))
	// Between two snoozes the task is claimed again (in progress, attempt
	// 1) for a moment: wait for a snapshot outside a claim.
	task := b.waitFor(t, b.enqueue(t, nil).ID, "snoozes", func(tk *jobs.Task) bool {
		return tk.Snoozes >= 2 && tk.State != jobs.StateInProgress
	})
	if ran.Load() != 0 {
		t.Fatalf("strict mode ran the handler %d times without Redis", ran.Load())
	}
	if task.State.Final() || task.Attempt != 0 {
		t.Errorf("state %s attempt %d; want not final, attempt given back", task.State, task.Attempt)
	}
}

func failing(failures int, err error) (handlers.Handler, *atomic.Int32) {
	var calls atomic.Int32
	return handlers.HandlerFunc(func(ctx context.Context, task *jobs.Task) (any, error) {
		if int(calls.Add(1)) <= failures {
			return nil, err
		}
		return "done", nil
	}), &calls
}

func TestRetryThenSucceed(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	h, calls := failing(2, errors.New("flaky"))
	b.startService(t, h, nil, nil)
	task := b.waitState(t, b.enqueue(t, nil).ID, jobs.StateCompleted)
	if task.Attempt != 3 || len(task.Errors) != 2 || calls.Load() != 3 {
		t.Fatalf("attempt %d, %d errors, %d calls; want 3, 2, 3", task.Attempt, len(task.Errors), calls.Load())
	}
	if task.Errors[0].Error != "flaky" || task.Errors[1].Attempt != 2 {
		t.Errorf("errors = %+v", task.Errors)
	}
	if got := counterValue(t, b.metrics.TasksTotal.WithLabelValues("test.task", "default", "retried")); got != 2 {
		t.Errorf("retried counter = %v, want 2", got)
	}
}

func TestRetriesExhaustedFails(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	h, calls := failing(100, errors.New("always"))
	b.startService(t, h, nil, nil)
	task := b.waitState(t, b.enqueue(t, &jobs.EnqueueOptions{MaxAttempts: 3}).ID, jobs.StateFailed)
	if task.Attempt != 3 || len(task.Errors) != 3 || calls.Load() != 3 {
		t.Fatalf("attempt %d, %d errors, %d calls; want 3 each", task.Attempt, len(task.Errors), calls.Load())
	}
}

func TestPermanentFailsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	h, calls := failing(100, jobs.Permanent(errors.New("bad input")))
	b.startService(t, h, nil, nil)
	task := b.waitState(t, b.enqueue(t, nil).ID, jobs.StateFailed)
	if task.Attempt != 1 || calls.Load() != 1 || task.MaxAttempts != jobs.DefaultMaxAttempts {
		t.Fatalf("attempt %d, calls %d, max %d; want 1, 1, %d", task.Attempt, calls.Load(), task.MaxAttempts, jobs.DefaultMaxAttempts)
	}
	if len(task.Errors) != 1 || !strings.Contains(task.Errors[0].Error, "bad input") || task.FinalizedAt == nil {
		t.Errorf("errors %+v finalized %v", task.Errors, task.FinalizedAt)
	}
}

func TestClassifyNonRetryable(t *testing.T) {
	t.Parallel()
	errFatal := errors.New("fatal class")
	b := setup(t, setupOpts{typeConfig: jobs.TypeConfig{Retry: jobs.RetryPolicy{Classify: func(err error) jobs.ErrorClass {
		if errors.Is(err, errFatal) {
			return jobs.NonRetryable
		}
		return jobs.Retryable
	}}}})
	h, _ := failing(100, errFatal)
	b.startService(t, h, nil, nil)
	if task := b.waitState(t, b.enqueue(t, nil).ID, jobs.StateFailed); task.Attempt != 1 {
		t.Errorf("attempt %d, want 1", task.Attempt)
	}
}

func TestRetryAfterSchedules(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	h, _ := failing(100, jobs.RetryAfter(time.Hour, errors.New("rate limited")))
	b.startService(t, h, nil, nil)
	before := time.Now()
	task := b.waitState(t, b.enqueue(t, nil).ID, jobs.StateRetrying)
	if task.ScheduledAt.Before(before.Add(59*time.Minute)) || task.ScheduledAt.After(time.Now().Add(61*time.Minute)) {
		t.Errorf("scheduled at %s, want about an hour after %s", task.ScheduledAt, before)
	}
}

func TestSnoozeUsesNoAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	h, calls := failing(2, jobs.Snooze(time.Millisecond))
	b.startService(t, h, nil, nil)
	task := b.waitState(t, b.enqueue(t, nil).ID, jobs.StateCompleted)
	if task.Attempt != 1 || task.Snoozes != 2 || calls.Load() != 3 || len(task.Errors) != 0 {
		t.Errorf("attempt %d snoozes %d calls %d errors %v; want 1, 2, 3, none", task.Attempt, task.Snoozes, calls.Load(), task.Errors)
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.startService(t, handlers.HandlerFunc(func(ctx context.Context, task *jobs.Task) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}), nil, nil)
	task := b.waitState(t, b.enqueue(t, &jobs.EnqueueOptions{Timeout: 50 * time.Millisecond, MaxAttempts: 1}).ID, jobs.StateFailed)
	if len(task.Errors) != 1 || !strings.Contains(task.Errors[0].Error, "task timed out after 50ms") {
		t.Errorf("errors = %+v, want a timeout", task.Errors)
	}
}

func TestPanicBecomesError(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.startService(t, handlers.HandlerFunc(func(ctx context.Context, task *jobs.Task) (any, error) {
		panic("boom")
	}), nil, nil)
	task := b.waitState(t, b.enqueue(t, &jobs.EnqueueOptions{MaxAttempts: 1}).ID, jobs.StateFailed)
	msg := task.Errors[0].Error
	if !strings.Contains(msg, "panic: boom") || !strings.Contains(msg, "service_test.go") {
		t.Errorf("error = %q, want the panic value and a stack", msg)
	}
}

func TestCancelRunningTask(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	started, sawCancel := make(chan struct{}), make(chan struct{})
	b.startService(t, handlers.HandlerFunc(func(ctx context.Context, task *jobs.Task) (any, error) {
		close(started)
		<-ctx.Done()
		close(sawCancel)
		return nil, ctx.Err()
	}), nil, nil)
	task := b.enqueue(t, nil)
	<-started
	if _, err := b.client.Cancel(t.Context(), task.ID); err != nil {
		t.Fatal(err)
	}
	<-sawCancel
	if got := b.waitState(t, task.ID, jobs.StateCancelled); got.FinalizedAt == nil {
		t.Error("cancelled task has no finalized_at")
	}
}

func TestShutdownLetsRunningTasksFinish(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	started, release := make(chan struct{}), make(chan struct{})
	mux := handlers.NewMux()
	mux.HandleFunc("test.task", func(ctx context.Context, task *jobs.Task) (any, error) {
		close(started)
		select {
		case <-release:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	svc, err := New(Config{Guard: GuardConfig{KeyPrefix: b.prefix}, ShutdownTimeout: time.Minute},
		Deps{Pool: b.pool, Redis: b.rdb, Registry: b.registry, Handlers: mux, Metrics: b.metrics})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	task := b.enqueue(t, nil)
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- svc.Stop(context.Background()) }()
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if got, _ := b.client.Get(t.Context(), task.ID); got.State != jobs.StateCompleted {
		t.Errorf("state after graceful stop = %s, want completed", got.State)
	}
}

func TestShutdownReturnsUnfinishedTasks(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	started := make(chan struct{})
	mux := handlers.NewMux()
	mux.HandleFunc("test.task", func(ctx context.Context, task *jobs.Task) (any, error) {
		close(started)
		<-ctx.Done() // a long task: only shutdown ends it
		return nil, ctx.Err()
	})
	svc, err := New(Config{Guard: GuardConfig{KeyPrefix: b.prefix}, ShutdownTimeout: 100 * time.Millisecond},
		Deps{Pool: b.pool, Redis: b.rdb, Registry: b.registry, Handlers: mux, Metrics: b.metrics})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	task := b.enqueue(t, nil)
	<-started
	if err := svc.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := b.client.Get(t.Context(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != jobs.StateQueued || got.Attempt != 0 {
		t.Errorf("after shutdown: state %s attempt %d; want queued with the attempt given back", got.State, got.Attempt)
	}
	if v := counterValue(t, b.metrics.TasksTotal.WithLabelValues("test.task", "default", "interrupted")); v != 1 {
		t.Errorf("interrupted counter = %v, want 1", v)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]Config{
		"bad queue name":   {Queues: map[string]int{"Bad Queue": 1}},
		"zero executor":    {Queues: map[string]int{"q": -1}},
		"bad guard mode":   {Guard: GuardConfig{Mode: "sometimes"}},
		"ttl too short":    {Guard: GuardConfig{TTL: time.Millisecond}},
		"op timeout > ttl": {Guard: GuardConfig{TTL: time.Second, OpTimeout: time.Second}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if err := cfg.WithDefaults().validate(); err == nil {
				t.Error("want an error")
			}
		})
	}
}

func TestLostLockCancelsAndDoesNotComplete(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	started, sawCancel := make(chan struct{}), make(chan error, 1)
	var calls atomic.Int32
	b.startService(t, handlers.HandlerFunc(func(ctx context.Context, task *jobs.Task) (any, error) {
		if calls.Add(1) > 1 {
			return nil, nil
		}
		close(started)
		<-ctx.Done()
		sawCancel <- context.Cause(ctx)
		return "should be dropped", nil // completing anyway must not count
	}), func(c *Config) { c.Guard.TTL = 300 * time.Millisecond; c.Guard.OpTimeout = 50 * time.Millisecond }, nil)
	task := b.enqueue(t, nil)
	<-started
	// Someone else takes the lock (what a rescued, re-claimed run would do).
	if err := b.rdb.Set(t.Context(), b.prefix+"task:"+strconv.FormatInt(task.ID, 10), "another-token", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if cause := <-sawCancel; !errors.Is(cause, errLockLost) {
		t.Fatalf("handler cancelled with %v, want errLockLost", cause)
	}
	got := b.waitFor(t, task.ID, "the lost attempt recorded", func(tk *jobs.Task) bool { return len(tk.Errors) == 1 })
	if got.State == jobs.StateCompleted || !strings.Contains(got.Errors[0].Error, "guard lock lost") {
		t.Fatalf("state %s errors %+v; want not completed with a lost-lock error", got.State, got.Errors)
	}
	if v := counterValue(t, b.metrics.GuardResults.WithLabelValues("lost")); v != 1 {
		t.Errorf("guard lost = %v, want 1", v)
	}
}
