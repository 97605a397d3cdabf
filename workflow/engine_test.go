package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard/switchyard/db"
	"github.com/switchyard/switchyard/dbtest"
	"github.com/switchyard/switchyard/handlers"
	"github.com/switchyard/switchyard/jobs"
	"github.com/switchyard/switchyard/metrics"
	"github.com/switchyard/switchyard/processing"
	"github.com/switchyard/switchyard/workflow"
)

// stepArgs is the task type of the tests' steps; Mode picks the behaviour
// of the shared handler.
type stepArgs struct {
	Mode  string `json:"mode,omitempty"`  // "" echoes; "fail"; "block"; "flaky"
	Value string `json:"value,omitempty"` // echoed in the output
}

func (stepArgs) TaskType() string { return "wf.step" }

type testBundle struct {
	pool    *pgxpool.Pool
	rdb     *redis.Client
	prefix  string
	reg     *jobs.Registry
	jobs    *jobs.Client
	engine  *workflow.Engine
	metrics *metrics.Metrics

	mu       sync.Mutex
	calls    map[string]int               // handler calls by "<execution>/<step>"
	contexts map[string]*jobs.WorkflowRef // the context each step's handler saw
	started  chan string                  // step keys of "block" handlers as they start
	release  chan struct{}                // closing it lets "block" handlers finish
	flaky    map[string]int               // failures left per step
}

func setup(t testing.TB) *testBundle {
	t.Helper()
	b := &testBundle{
		pool: dbtest.NewPool(t), rdb: dbtest.Redis(t), prefix: dbtest.KeyPrefix(t), reg: jobs.NewRegistry(),
		calls: map[string]int{}, contexts: map[string]*jobs.WorkflowRef{}, started: make(chan string, 100),
		release: make(chan struct{}), flaky: map[string]int{},
	}
	if err := jobs.Register[stepArgs](b.reg, jobs.TypeConfig{Retry: jobs.RetryPolicy{MaxAttempts: 3, InitialBackoff: 10 * time.Millisecond}}); err != nil {
		t.Fatal(err)
	}
	var err error
	if b.jobs, err = jobs.NewInsertOnlyClient(b.pool, b.reg); err != nil {
		t.Fatal(err)
	}
	if b.engine, err = workflow.New(workflow.Config{CacheKeyPrefix: b.prefix}, workflow.Deps{Pool: b.pool, Jobs: b.jobs, Redis: b.rdb}); err != nil {
		t.Fatal(err)
	}
	if b.metrics, err = metrics.New(prometheus.NewRegistry(), "test"); err != nil {
		t.Fatal(err)
	}
	return b
}

// handle is the handler of wf.step.
func (b *testBundle) handle(ctx context.Context, task *jobs.Task) (any, error) {
	var args stepArgs
	if err := json.Unmarshal(task.Args, &args); err != nil {
		return nil, jobs.Permanent(err)
	}
	ref := task.Workflow
	id := fmt.Sprintf("%d/%s", ref.ExecutionID, ref.Step)
	b.mu.Lock()
	b.calls[id]++
	b.contexts[id] = ref
	b.mu.Unlock()
	switch args.Mode {
	case "fail":
		return nil, jobs.Permanent(errors.New("step failed on purpose"))
	case "flaky":
		b.mu.Lock()
		left := b.flaky[id]
		b.flaky[id] = left - 1
		b.mu.Unlock()
		if left > 0 {
			return nil, errors.New("flaky failure")
		}
	case "block":
		b.started <- ref.Step
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-b.release:
		}
	}
	return map[string]string{"value": args.Value, "step": ref.Step}, nil
}

// startWorker starts a worker pod (a processing.Service with the engine),
// stopped at cleanup or by the returned func.
func (b *testBundle) startWorker(t testing.TB) (stop func()) {
	t.Helper()
	mux := handlers.NewMux()
	mux.HandleFunc("wf.step", b.handle)
	b.engine.RegisterHandlers(mux)
	svc, err := processing.New(processing.Config{
		Queues:            map[string]int{"default": 20},
		Guard:             processing.GuardConfig{KeyPrefix: b.prefix},
		FetchPollInterval: 50 * time.Millisecond,
		ShutdownTimeout:   time.Second,
	}, processing.Deps{Pool: b.pool, Redis: b.rdb, Registry: b.reg, Handlers: mux, Metrics: b.metrics, Workflow: b.engine})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if err := svc.Stop(ctx); err != nil {
				t.Errorf("stop worker: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func (b *testBundle) start(t *testing.T, def *workflow.Definition) *workflow.Execution {
	t.Helper()
	res, err := b.engine.Start(t.Context(), def)
	if err != nil {
		t.Fatal(err)
	}
	return res.Execution
}

// waitFor polls the execution until cond holds or 20 seconds pass.
func (b *testBundle) waitFor(t testing.TB, id int64, what string, cond func(*workflow.Execution) bool) *workflow.Execution {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		exec, err := b.engine.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if cond(exec) {
			return exec
		}
		if time.Now().After(deadline) {
			data, _ := json.MarshalIndent(exec, "", "  ")
			t.Fatalf("execution %d: timed out waiting for %s; now:\n%s", id, what, data)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (b *testBundle) waitStatus(t testing.TB, id int64, status string) *workflow.Execution {
	t.Helper()
	return b.waitFor(t, id, "status "+status, func(e *workflow.Execution) bool { return e.Status == status })
}

func (b *testBundle) callsOf(id int64, step string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[fmt.Sprintf("%d/%s", id, step)]
}

func step(e *workflow.Execution, key string) workflow.StepState {
	for _, s := range e.Steps {
		if s.Key == key {
			return s
		}
	}
	panic("no step " + key)
}

func task(key, mode, value string, deps ...string) workflow.Step {
	args, _ := json.Marshal(stepArgs{Mode: mode, Value: value})
	return workflow.Step{Key: key, DependsOn: deps, Task: &workflow.TaskSpec{Type: "wf.step", Args: args}}
}

func dur(d time.Duration) workflow.Duration { return workflow.Duration(d) }

func TestLinearWithContext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(t)
	exec := b.start(t, &workflow.Definition{Name: "linear", Input: json.RawMessage(`{"model":"m1"}`), Steps: []workflow.Step{
		task("a", "", "from-a"), task("b", "", "from-b", "a"), task("c", "", "from-c", "b"),
	}})
	done := b.waitStatus(t, exec.ID, workflow.StatusCompleted)
	if done.Progress != 1 || done.StepsFinal != 3 {
		t.Errorf("progress %v final %d", done.Progress, done.StepsFinal)
	}
	if out := string(step(done, "c").Output); !strings.Contains(out, "from-c") {
		t.Errorf("output of c = %s", out)
	}
	b.mu.Lock()
	ref := b.contexts[fmt.Sprintf("%d/c", exec.ID)]
	b.mu.Unlock()
	if !strings.Contains(string(ref.Input), `"m1"`) || !strings.Contains(string(ref.Outputs["a"]), "from-a") || !strings.Contains(string(ref.Outputs["b"]), "from-b") {
		t.Errorf("context of c: input %s outputs %v", ref.Input, ref.Outputs)
	}
	hist, err := b.engine.History(t.Context(), exec.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]int{}
	for _, ev := range hist {
		types[ev.Type]++
	}
	if types["execution_started"] != 1 || types["step_completed"] != 3 || types["step_started"] != 3 || types["execution_completed"] != 1 {
		t.Errorf("history types = %v", types)
	}
}

func TestFanOutFanIn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(t)
	b.startWorker(t) // two pods finish branches at the same instants
	const width = 40
	steps := []workflow.Step{task("root", "", "")}
	var branches []string
	for i := range width {
		k := fmt.Sprintf("branch-%d", i)
		branches = append(branches, k)
		steps = append(steps, task(k, "", k, "root"))
	}
	steps = append(steps, task("join", "", "", branches...))
	exec := b.start(t, &workflow.Definition{Name: "fan", Steps: steps})
	done := b.waitStatus(t, exec.ID, workflow.StatusCompleted)
	if n := b.callsOf(exec.ID, "join"); n != 1 {
		t.Errorf("join ran %d times, want 1", n)
	}
	var joinTasks int
	if err := b.pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job WHERE metadata->'switchyard'->'workflow'->>'step' = 'join'`).Scan(&joinTasks); err != nil {
		t.Fatal(err)
	}
	if joinTasks != 1 || done.StepsFinal != width+2 {
		t.Errorf("join dispatched %d times, final %d", joinTasks, done.StepsFinal)
	}
	b.mu.Lock()
	ref := b.contexts[fmt.Sprintf("%d/join", exec.ID)]
	b.mu.Unlock()
	if len(ref.Outputs) < width+1 {
		t.Errorf("join saw %d outputs, want %d", len(ref.Outputs), width+1)
	}
}

func TestOptionalAndRequiredFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(t)
	opt := task("notify", "fail", "")
	opt.Optional = true
	exec := b.start(t, &workflow.Definition{Name: "optional", Steps: []workflow.Step{opt, task("after", "", "", "notify")}})
	done := b.waitStatus(t, exec.ID, workflow.StatusCompleted)
	if s := step(done, "notify"); s.Status != workflow.StepFailed || s.Error == "" {
		t.Errorf("optional step %+v", s)
	}

	exec = b.start(t, &workflow.Definition{Name: "required", Steps: []workflow.Step{
		task("bad", "fail", ""), task("blocked", "block", ""), task("later", "", "", "bad"),
	}})
	<-b.started // "blocked" runs while "bad" fails
	failed := b.waitStatus(t, exec.ID, workflow.StatusFailed)
	if s := step(failed, "later"); s.Status != workflow.StepSkipped {
		t.Errorf("dependent of the failed step: %s, want skipped", s.Status)
	}
	if s := step(failed, "blocked"); s.Status != workflow.StepCancelled {
		t.Errorf("running step: %s, want cancelled", s.Status)
	}
	if !strings.Contains(failed.Error, "step bad failed") {
		t.Errorf("execution error %q", failed.Error)
	}
	// The running handler's context was cancelled: its task ends cancelled.
	b.waitTaskState(t, *step(failed, "blocked").TaskID, jobs.StateCancelled)
}

// waitTaskState polls a task until it is in state or 15 seconds pass.
func (b *testBundle) waitTaskState(t *testing.T, id int64, state jobs.State) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		tk, err := b.jobs.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if tk.State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %d is %s, want %s", id, tk.State, state)
		}
		<-tick.C
	}
}

func TestDelaySurvivesWorkerRestart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	stopFirst := b.startWorker(t)
	exec := b.start(t, &workflow.Definition{Name: "delay", Steps: []workflow.Step{
		task("before", "", ""),
		{Key: "pause", DependsOn: []string{"before"}, Delay: &workflow.DelaySpec{Duration: dur(1500 * time.Millisecond)}},
		task("after", "", "", "pause"),
	}})
	b.waitFor(t, exec.ID, "the delay to start", func(e *workflow.Execution) bool { return step(e, "pause").Status == workflow.StepWaiting })
	stopFirst() // every worker gone during the delay
	if e, _ := b.engine.Get(t.Context(), exec.ID); e.Status != workflow.StatusRunning || step(e, "pause").Status != workflow.StepWaiting {
		t.Fatalf("after stopping workers: %s / %s", e.Status, step(e, "pause").Status)
	}
	b.startWorker(t) // a new worker, sharing nothing in memory with the first
	done := b.waitStatus(t, exec.ID, workflow.StatusCompleted)
	if s := step(done, "pause"); !strings.Contains(string(s.Output), "fired_at") {
		t.Errorf("delay output %s", s.Output)
	}
}

func TestSignals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(t)
	def := &workflow.Definition{Name: "approval", Steps: []workflow.Step{
		task("prepare", "block", ""),
		{Key: "approve", DependsOn: []string{"prepare"}, Wait: &workflow.WaitSpec{Signal: "approval"}},
		task("deploy", "", "", "approve"),
	}}
	// Before the step is reached: kept, consumed when reached.
	early := b.start(t, def)
	<-b.started
	res, err := b.engine.Signal(t.Context(), early.ID, "approval", json.RawMessage(`{"by":"alice"}`), "sig-1")
	if err != nil || res.Duplicate || res.ConsumedBy != "" {
		t.Fatalf("early signal: %+v %v", res, err)
	}
	if res, err := b.engine.Signal(t.Context(), early.ID, "approval", json.RawMessage(`{"by":"mallory"}`), "sig-1"); err != nil || !res.Duplicate {
		t.Fatalf("duplicate signal: %+v %v", res, err)
	}
	b.release <- struct{}{} // let prepare finish (one handler)
	done := b.waitStatus(t, early.ID, workflow.StatusCompleted)
	if out := string(step(done, "approve").Output); !strings.Contains(out, "alice") {
		t.Errorf("approve output %s, want the first signal's payload", out)
	}

	// After the step is reached: completes it.
	late := b.start(t, def)
	<-b.started
	b.release <- struct{}{}
	b.waitFor(t, late.ID, "the wait", func(e *workflow.Execution) bool { return step(e, "approve").Status == workflow.StepWaiting })
	res, err = b.engine.Signal(t.Context(), late.ID, "approval", json.RawMessage(`{"by":"bob"}`), "")
	if err != nil || res.ConsumedBy != "approve" {
		t.Fatalf("late signal: %+v %v", res, err)
	}
	done = b.waitStatus(t, late.ID, workflow.StatusCompleted)
	if out := string(step(done, "approve").Output); !strings.Contains(out, "bob") {
		t.Errorf("approve output %s", out)
	}
	if _, err := b.engine.Signal(t.Context(), late.ID, "approval", nil, ""); !errors.Is(err, workflow.ErrInvalidState) {
		t.Errorf("signal to a finished execution: %v, want ErrInvalidState", err)
	}
}

func TestTimeouts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(t)
	wait := b.start(t, &workflow.Definition{Name: "wait-timeout", Steps: []workflow.Step{
		{Key: "approve", Wait: &workflow.WaitSpec{Signal: "approval", Timeout: dur(200 * time.Millisecond)}},
		task("after", "", "", "approve"),
	}})
	failed := b.waitStatus(t, wait.ID, workflow.StatusFailed)
	if s := step(failed, "approve"); s.Status != workflow.StepFailed || !strings.Contains(s.Error, "no \"approval\" signal within 200ms") {
		t.Errorf("wait step %+v", s)
	}

	slow := b.start(t, &workflow.Definition{Name: "exec-timeout", Timeout: dur(300 * time.Millisecond), Steps: []workflow.Step{
		task("forever", "block", ""), task("after", "", "", "forever"),
	}})
	<-b.started
	timedOut := b.waitStatus(t, slow.ID, workflow.StatusTimedOut)
	if step(timedOut, "forever").Status != workflow.StepCancelled || step(timedOut, "after").Status != workflow.StepCancelled {
		t.Errorf("steps after timeout: %+v", timedOut.Steps)
	}
}

func TestCancelCascadesToTaskAndChild(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(t)
	exec := b.start(t, &workflow.Definition{Name: "parent", Steps: []workflow.Step{
		task("running", "block", ""),
		{Key: "child", Workflow: &workflow.Definition{Name: "child", Steps: []workflow.Step{
			{Key: "wait", Wait: &workflow.WaitSpec{Signal: "never"}},
		}}},
	}})
	<-b.started
	running := b.waitFor(t, exec.ID, "the child to start", func(e *workflow.Execution) bool { return step(e, "child").ChildExecutionID != nil })
	childID := *step(running, "child").ChildExecutionID
	b.waitFor(t, childID, "the child's wait", func(e *workflow.Execution) bool { return step(e, "wait").Status == workflow.StepWaiting })

	cancelled, err := b.engine.Cancel(t.Context(), exec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cancelled.Status != workflow.StatusCancelled {
		t.Fatalf("status %s", cancelled.Status)
	}
	b.waitStatus(t, childID, workflow.StatusCancelled)
	b.waitTaskState(t, *step(cancelled, "running").TaskID, jobs.StateCancelled)
	if _, err := b.engine.Cancel(t.Context(), exec.ID); !errors.Is(err, workflow.ErrInvalidState) {
		t.Errorf("second cancel: %v", err)
	}
}

func TestChildWorkflowCompletes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(t)
	exec := b.start(t, &workflow.Definition{Name: "parent", Steps: []workflow.Step{
		{Key: "child", Workflow: &workflow.Definition{Name: "child", Steps: []workflow.Step{task("inner", "", "deep")}}},
		task("after", "", "", "child"),
	}})
	done := b.waitStatus(t, exec.ID, workflow.StatusCompleted)
	if out := string(step(done, "child").Output); !strings.Contains(out, "deep") {
		t.Errorf("child step output %s", out)
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(t)
	exec := b.start(t, &workflow.Definition{Name: "pausable", Steps: []workflow.Step{
		task("first", "block", ""), task("second", "", "", "first"),
	}})
	<-b.started
	if _, err := b.engine.Pause(t.Context(), exec.ID); err != nil {
		t.Fatal(err)
	}
	b.release <- struct{}{} // first finishes while paused
	held := b.waitFor(t, exec.ID, "second held", func(e *workflow.Execution) bool {
		return step(e, "first").Status == workflow.StepCompleted && step(e, "second").Status == workflow.StepReady
	})
	if held.Status != workflow.StatusPaused || step(held, "second").TaskID != nil {
		t.Fatalf("while paused: %s, second task %v", held.Status, step(held, "second").TaskID)
	}
	if _, err := b.engine.Resume(t.Context(), exec.ID); err != nil {
		t.Fatal(err)
	}
	b.waitStatus(t, exec.ID, workflow.StatusCompleted)
	if _, err := b.engine.Resume(t.Context(), exec.ID); !errors.Is(err, workflow.ErrInvalidState) {
		t.Errorf("resume of a completed execution: %v", err)
	}
}

func TestRetryKeepsCompletedOutputs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(t)
	exec := b.start(t, &workflow.Definition{Name: "retry", Steps: []workflow.Step{
		task("good", "", "kept"), task("bad", "flaky", "", "good"), task("after", "", "", "bad"),
	}})
	b.mu.Lock()
	b.flaky[fmt.Sprintf("%d/bad", exec.ID)] = 3 // all three attempts fail
	b.mu.Unlock()
	failed := b.waitStatus(t, exec.ID, workflow.StatusFailed)
	if s := step(failed, "bad"); s.Status != workflow.StepFailed || s.Attempt != 3 {
		t.Fatalf("bad step %+v", s)
	}
	if _, err := b.engine.Retry(t.Context(), exec.ID); err != nil {
		t.Fatal(err)
	}
	done := b.waitStatus(t, exec.ID, workflow.StatusCompleted)
	if b.callsOf(exec.ID, "good") != 1 || !strings.Contains(string(step(done, "good").Output), "kept") {
		t.Errorf("good ran %d times, output %s", b.callsOf(exec.ID, "good"), step(done, "good").Output)
	}
	if b.callsOf(exec.ID, "bad") != 4 || b.callsOf(exec.ID, "after") != 1 {
		t.Errorf("bad ran %d times, after %d", b.callsOf(exec.ID, "bad"), b.callsOf(exec.ID, "after"))
	}
}

func TestIdempotentStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	def := &workflow.Definition{Name: "once", IdempotencyKey: "deploy-42", Steps: []workflow.Step{task("a", "", "")}}
	first, err := b.engine.Start(t.Context(), def)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	ids := make([]int64, 5)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := b.engine.Start(context.Background(), def)
			if err != nil || !res.Existing {
				t.Errorf("repeat start: %+v %v", res, err)
				return
			}
			ids[i] = res.Execution.ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != first.Execution.ID {
			t.Errorf("repeat start returned %d, want %d", id, first.Execution.ID)
		}
	}
	var n int
	_ = b.pool.QueryRow(t.Context(), `SELECT count(*) FROM switchyard_execution`).Scan(&n)
	if n != 1 {
		t.Errorf("%d executions, want 1", n)
	}
}

func TestFenceRejectsStaleCompletion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	exec := b.start(t, &workflow.Definition{Name: "fenced", Steps: []workflow.Step{task("a", "", "")}})
	tid := *step(mustGet(t, b, exec.ID), "a").TaskID
	// Claim the task as a worker would.
	var claim db.Claim
	if err := b.pool.QueryRow(t.Context(), `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now()
		WHERE id = $1 RETURNING id, attempt, attempted_at`, tid).Scan(&claim.ID, &claim.Attempt, &claim.AttemptedAt); err != nil {
		t.Fatal(err)
	}
	ref := &jobs.WorkflowRef{ExecutionID: exec.ID, Step: "a", Role: "task"}
	stale := claim
	stale.AttemptedAt = claim.AttemptedAt.Add(-time.Second) // an earlier run of the same attempt number
	err := b.engine.Finish(t.Context(), stale, ref, jobs.Outcome{Kind: jobs.OutcomeCompleted, Output: json.RawMessage(`"late"`)})
	if !errors.Is(err, db.ErrStaleClaim) {
		t.Fatalf("stale finish: %v, want ErrStaleClaim", err)
	}
	if s := step(mustGet(t, b, exec.ID), "a"); s.Status != workflow.StepReady || s.Output != nil {
		t.Fatalf("after the stale finish the step is %s with output %s", s.Status, s.Output)
	}
	if err := b.engine.Finish(t.Context(), claim, ref, jobs.Outcome{Kind: jobs.OutcomeCompleted, Output: json.RawMessage(`"ok"`)}); err != nil {
		t.Fatal(err)
	}
	if e := mustGet(t, b, exec.ID); e.Status != workflow.StatusCompleted || string(step(e, "a").Output) != `"ok"` {
		t.Errorf("after the current finish: %s %s", e.Status, step(e, "a").Output)
	}
	if err := b.engine.Finish(t.Context(), claim, ref, jobs.Outcome{Kind: jobs.OutcomeCompleted}); !errors.Is(err, db.ErrStaleClaim) {
		t.Errorf("second finish of the same claim: %v, want ErrStaleClaim", err)
	}
}

func TestRedisFlushLosesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.startWorker(t)
	exec := b.start(t, &workflow.Definition{Name: "flush", Input: json.RawMessage(`{"k":"v"}`), Steps: []workflow.Step{
		task("a", "", "A"), task("b", "block", "B", "a"), task("c", "", "C", "b"),
	}})
	<-b.started // a is done and cached; b runs
	// Flush every key of this test (guard locks and the context cache), as
	// a Redis restart without persistence would.
	keys, err := b.rdb.Keys(t.Context(), b.prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("expected cached keys before the flush")
	}
	if err := b.rdb.Del(t.Context(), keys...).Err(); err != nil {
		t.Fatal(err)
	}
	close(b.release)
	done := b.waitStatus(t, exec.ID, workflow.StatusCompleted)
	b.mu.Lock()
	ref := b.contexts[fmt.Sprintf("%d/c", exec.ID)]
	b.mu.Unlock()
	if !strings.Contains(string(ref.Outputs["a"]), `"A"`) || !strings.Contains(string(ref.Outputs["b"]), `"B"`) || !strings.Contains(string(ref.Input), `"v"`) {
		t.Errorf("c's context after the flush: %s %v", ref.Input, ref.Outputs)
	}
	if done.StepsFinal != 3 {
		t.Errorf("final steps %d", done.StepsFinal)
	}
}

func TestInvalidDefinitionListsEveryProblem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	def := &workflow.Definition{Name: "", Steps: []workflow.Step{
		task("a", "", "", "b"), task("b", "", "", "a"), // cycle
		task("a", "", ""), // duplicate
		{Key: "c", DependsOn: []string{"nope"}, Task: &workflow.TaskSpec{Type: "no.such.type"}},
		{Key: "d", Delay: &workflow.DelaySpec{Duration: dur(-time.Second)}},
		{Key: "e", Wait: &workflow.WaitSpec{}},
		{Key: "f"},
	}}
	_, err := b.engine.Start(t.Context(), def)
	var verrs workflow.ValidationErrors
	if !errors.As(err, &verrs) {
		t.Fatalf("err = %v, want ValidationErrors", err)
	}
	fields := map[string]bool{}
	for _, e := range verrs {
		fields[e.Field] = true
	}
	for _, want := range []string{"name", "steps[2].key", "steps[3].depends_on[0]", "steps[3].task.type", "steps[4].delay.duration", "steps[5].wait.signal", "steps[6].kind", "steps"} {
		if !fields[want] {
			t.Errorf("no problem reported for %s; got %v", want, verrs)
		}
	}
	var n int
	_ = b.pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM switchyard_execution) + (SELECT count(*) FROM river_job)`).Scan(&n)
	if n != 0 {
		t.Errorf("an invalid definition wrote %d rows", n)
	}
}

func mustGet(t *testing.T, b *testBundle, id int64) *workflow.Execution {
	t.Helper()
	e, err := b.engine.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
