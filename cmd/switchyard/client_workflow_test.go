package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard/switchyard/api"
	"github.com/switchyard/switchyard/dbtest"
	"github.com/switchyard/switchyard/events"
	"github.com/switchyard/switchyard/handlers"
	"github.com/switchyard/switchyard/jobs"
	"github.com/switchyard/switchyard/metrics"
	"github.com/switchyard/switchyard/processing"
	"github.com/switchyard/switchyard/workflow"
)

// startWorkflowAPI is startAPI with the workflow engine and a worker pod
// that runs the built-in task types and the engine's control tasks, so
// executions progress.
func startWorkflowAPI(t *testing.T) *apiFixture {
	t.Helper()
	pool := dbtest.NewPool(t)
	rdb := dbtest.Redis(t)
	prefix := dbtest.KeyPrefix(t)
	registry := jobs.NewRegistry()
	mux := handlers.NewMux()
	if err := handlers.RegisterBuiltins(registry, mux, handlers.BuiltinConfig{}); err != nil {
		t.Fatal(err)
	}
	client, err := jobs.NewInsertOnlyClient(pool, registry)
	if err != nil {
		t.Fatal(err)
	}
	engine, err := workflow.New(workflow.Config{CacheKeyPrefix: prefix}, workflow.Deps{Pool: pool, Jobs: client, Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	engine.RegisterHandlers(mux)
	m, err := metrics.New(prometheus.NewRegistry(), "test")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := processing.New(processing.Config{
		Queues:            map[string]int{"default": 10},
		Guard:             processing.GuardConfig{KeyPrefix: prefix},
		FetchPollInterval: 50 * time.Millisecond,
		ShutdownTimeout:   time.Second,
	}, processing.Deps{Pool: pool, Redis: rdb, Registry: registry, Handlers: mux, Metrics: m, Workflow: engine})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := svc.Stop(ctx); err != nil {
			t.Errorf("stop worker: %v", err)
		}
	})
	broker := events.NewBroker(pool, events.Config{}, nil)
	if err := broker.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = broker.Stop(context.Background()) })
	apiServer, err := api.New(api.Config{Tokens: []api.Token{
		api.NewToken("reader", api.ScopeRead, cliReadToken),
		api.NewToken("writer", api.ScopeWrite, cliWriteToken),
		api.NewToken("admin", api.ScopeAdmin, cliAdminToken),
	}}, api.Deps{Jobs: client, Pool: pool, Events: broker, Metrics: prometheus.NewRegistry(), Workflows: engine})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(apiServer)
	t.Cleanup(ts.Close)
	return &apiFixture{url: ts.URL, pool: pool}
}

// Definitions of the tests.
const (
	noopPairDef = `{"name":"noop-pair","steps":[
		{"key":"first","task":{"type":"noop"}},
		{"key":"second","depends_on":["first"],"task":{"type":"noop"}}]}`
	// approvalDef waits for the signal "approve", then runs a no-op.
	approvalDef = `{"name":"approval","input":{"env":"test"},"steps":[
		{"key":"approve","wait":{"signal":"approve"}},
		{"key":"deploy","depends_on":["approve"],"task":{"type":"noop"}}]}`
	// failingDef's request is refused, and its step has one attempt.
	failingDef = `{"name":"failing","steps":[
		{"key":"fetch","task":{"type":"http.request","args":{"url":"http://127.0.0.1:1/"},"retry":{"max_attempts":1}}},
		{"key":"after","depends_on":["fetch"],"task":{"type":"noop"}}]}`
)

// writeDef writes a definition file and returns its path.
func writeDef(t *testing.T, def string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "def.json")
	if err := os.WriteFile(path, []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startedID finds the execution id in start's output.
func startedID(out string) (int64, bool) {
	for _, l := range strings.Split(out, "\n") {
		var id int64
		if _, err := fmt.Sscanf(l, "started execution %d:", &id); err == nil {
			return id, true
		}
	}
	return 0, false
}

// startExecution starts def with the CLI and returns the execution's id.
func startExecution(t *testing.T, env map[string]string, def string, extra ...string) int64 {
	t.Helper()
	out := mustRun(t, env, append([]string{"workflow", "start", writeDef(t, def)}, extra...)...)
	id, ok := startedID(out)
	if !ok {
		t.Fatalf("workflow start printed %q, no execution id", out)
	}
	return id
}

// getExecution reads an execution with `workflow get --json`.
func getExecution(t *testing.T, env map[string]string, id int64) executionView {
	t.Helper()
	return decodeJSON[executionView](t, mustRun(t, env, "workflow", "get", fmt.Sprint(id), "--json"))
}

// waitExecutionCond polls the execution until cond holds.
func waitExecutionCond(t *testing.T, env map[string]string, id int64, what string, cond func(*executionView) bool) executionView {
	t.Helper()
	var e executionView
	waitFor(t, fmt.Sprintf("execution %d: %s", id, what), func() (bool, string) {
		e = getExecution(t, env, id)
		data, _ := json.Marshal(e)
		return cond(&e), string(data)
	})
	return e
}

func waitExecutionStatus(t *testing.T, env map[string]string, id int64, status string) executionView {
	t.Helper()
	return waitExecutionCond(t, env, id, "status "+status, func(e *executionView) bool { return e.Status == status })
}

func stepOf(e *executionView, key string) stepView {
	for _, s := range e.Steps {
		if s.Key == key {
			return s
		}
	}
	return stepView{}
}

// bgCmd is a command running in a goroutine.
type bgCmd struct {
	stdout, stderr syncBuffer
	cancel         context.CancelFunc
	done           chan error
}

// startCmd runs a command in the background; cancelling its context is
// Ctrl-C.
func startCmd(t *testing.T, env map[string]string, args ...string) *bgCmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	c := &bgCmd{cancel: cancel, done: make(chan error, 1)}
	go func() {
		c.done <- run(ctx, append([]string{"switchyard"}, args...), getenvOf(env), &c.stdout, &c.stderr)
	}()
	t.Cleanup(func() {
		cancel()
		<-c.done
	})
	return c
}

// result waits for the command to return.
func (c *bgCmd) result(t *testing.T) error {
	t.Helper()
	select {
	case err := <-c.done:
		c.done <- err // for the cleanup
		return err
	case <-time.After(pollFor):
		t.Fatalf("the command did not return within %s\nstdout:\n%s\nstderr:\n%s", pollFor, c.stdout.String(), c.stderr.String())
		return nil
	}
}

// waitOutput polls the command's stdout until it contains want.
func (c *bgCmd) waitOutput(t *testing.T, want string) string {
	t.Helper()
	var out string
	waitFor(t, "output "+want, func() (bool, string) {
		out = c.stdout.String()
		return strings.Contains(out, want), out
	})
	return out
}

// progressLines are the lines of --wait's output that draw the bar.
func progressLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "[") {
			lines = append(lines, l)
		}
	}
	return lines
}

func TestClientWorkflowStartGetListHistory(t *testing.T) {
	t.Parallel()
	f := startWorkflowAPI(t)
	env := f.env(cliWriteToken)
	read := f.env(cliReadToken)

	out := mustRun(t, env, "workflow", "start", writeDef(t, noopPairDef))
	mustContain(t, "start output", out, "started execution ", "name=noop-pair", "steps=2")
	id, ok := startedID(out)
	if !ok {
		t.Fatalf("start printed %q", out)
	}
	sid := fmt.Sprint(id)
	done := waitExecutionStatus(t, read, id, "completed")
	if done.StepsFinal != 2 || done.Progress != 1 || stepOf(&done, "second").Status != "completed" {
		t.Errorf("completed execution = %+v", done)
	}

	// get: the summary and the step table.
	out = mustRun(t, read, "workflow", "get", sid)
	mustContain(t, "workflow get", out, "id:", sid, "name:", "noop-pair", "status:", "completed", "2/2 steps (100%)",
		"KEY", "KIND", "STATUS", "ATTEMPT", "STARTED", "FINISHED", "ERROR")
	for _, key := range []string{"first", "second"} {
		row := strings.Fields(tableRow(out, key))
		if len(row) != 7 || row[1] != "task" || row[2] != "completed" || row[3] != "1" || row[6] != "-" {
			t.Errorf("workflow get: row of step %s = %q\n%s", key, row, out)
		}
	}

	// list: a table with the execution; filters.
	other := startExecution(t, env, approvalDef)
	out = mustRun(t, read, "workflow", "list")
	mustContain(t, "workflow list", out, "ID", "NAME", "STATUS", "STEPS", "CREATED", "FINISHED")
	if row := strings.Fields(tableRow(out, sid)); len(row) < 4 || row[1] != "noop-pair" || row[2] != "completed" || row[3] != "2/2" {
		t.Errorf("workflow list row of %s = %q\n%s", sid, row, out)
	}
	if tableRow(out, fmt.Sprint(other)) == "" {
		t.Errorf("workflow list has no row for execution %d:\n%s", other, out)
	}
	listIDs := func(args ...string) []string {
		t.Helper()
		var ids []string
		page := decodeJSON[struct {
			Executions []executionView `json:"executions"`
		}](t, mustRun(t, read, append([]string{"workflow", "list", "--json"}, args...)...))
		for _, e := range page.Executions {
			ids = append(ids, fmt.Sprint(e.ID))
		}
		return ids
	}
	if got := strings.Join(listIDs("--status", "completed"), " "); got != sid {
		t.Errorf("list --status completed = %s, want %s", got, sid)
	}
	if got := strings.Join(listIDs("--status", "completed,running"), " "); got != fmt.Sprintf("%d %s", other, sid) {
		t.Errorf("list --status completed,running = %s, want %d %s (newest first)", got, other, sid)
	}
	if got := strings.Join(listIDs("--name", "approval"), " "); got != fmt.Sprint(other) {
		t.Errorf("list --name approval = %s, want %d", got, other)
	}
	stdout, stderr, err := runCmd(t.Context(), read, "workflow", "list", "--limit", "1")
	if err != nil {
		t.Fatalf("workflow list --limit 1: %v", err)
	}
	if n := len(strings.Split(strings.TrimSpace(stdout), "\n")); n != 2 {
		t.Errorf("workflow list --limit 1 printed %d lines, want a header and a row:\n%s", n, stdout)
	}
	mustContain(t, "stderr of a partial list", stderr, "--cursor ", "--all")
	if got := listIDs("--limit", "1", "--all"); len(got) != 2 {
		t.Errorf("list --limit 1 --all = %v, want both executions", got)
	}
	mustContain(t, "bad status", runErr(t, read, "workflow", "list", "--status", "done"), "status")

	// history: the events, oldest first.
	out = mustRun(t, read, "workflow", "history", sid)
	mustContain(t, "workflow history", out, "AT", "TYPE", "STEP", "DATA", "execution_started", "step_completed", "execution_completed")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if f := strings.Fields(lines[1]); len(f) < 2 || f[1] != "execution_started" {
		t.Errorf("the first event is %q, want execution_started", lines[1])
	}
	if f := strings.Fields(lines[len(lines)-1]); len(f) < 2 || f[1] != "execution_completed" {
		t.Errorf("the last event is %q, want execution_completed", lines[len(lines)-1])
	}
	hist := decodeJSON[struct {
		Events []eventView `json:"events"`
	}](t, mustRun(t, read, "workflow", "history", sid, "--json"))
	if len(hist.Events) != len(lines)-1 || hist.Events[0].Type != "execution_started" {
		t.Errorf("history --json has %d events (first %+v), the table %d", len(hist.Events), hist.Events[0], len(lines)-1)
	}

	// Errors.
	mustContain(t, "get of a missing execution", runErr(t, read, "workflow", "get", "999999"), "404")
	mustContain(t, "history of a missing execution", runErr(t, read, "workflow", "history", "999999"), "404")
	mustContain(t, "get of a bad id", runErr(t, read, "workflow", "get", "abc"), `"abc"`, "execution id")
	mustContain(t, "start with a read token", runErr(t, read, "workflow", "start", writeDef(t, noopPairDef)), "403")
}

func TestClientWorkflowStartWait(t *testing.T) {
	t.Parallel()
	f := startWorkflowAPI(t)
	env := f.env(cliWriteToken)

	out := mustRun(t, env, "workflow", "start", writeDef(t, noopPairDef), "--wait")
	id, ok := startedID(out)
	if !ok {
		t.Fatalf("start --wait printed %q", out)
	}
	lines := progressLines(out)
	if len(lines) == 0 {
		t.Fatalf("start --wait printed no progress lines:\n%s", out)
	}
	if last := lines[len(lines)-1]; last != "[####################] 2/2 steps  completed" {
		t.Errorf("last progress line %q", last)
	}
	for i := 1; i < len(lines); i++ {
		if lines[i] == lines[i-1] {
			t.Errorf("progress line %q printed twice in a row:\n%s", lines[i], out)
		}
	}
	if strings.Contains(out, "\r") {
		t.Errorf("progress redrawn in place on a pipe:\n%q", out)
	}
	mustContain(t, "start --wait", out, fmt.Sprintf("execution %d completed in ", id))

	// --json: stdout is the final execution only; the progress goes to stderr.
	stdout, stderr, err := runCmd(t.Context(), env, "workflow", "start", writeDef(t, noopPairDef), "--wait", "--json")
	if err != nil {
		t.Fatalf("start --wait --json: %v\n%s", err, stderr)
	}
	if e := decodeJSON[executionView](t, stdout); e.Status != "completed" || len(e.Steps) != 2 {
		t.Errorf("start --wait --json = %+v", e)
	}
	mustContain(t, "stderr of start --wait --json", stderr, "2/2 steps  completed")
}

func TestClientWorkflowSignal(t *testing.T) {
	t.Parallel()
	f := startWorkflowAPI(t)
	env := f.env(cliWriteToken)

	waiter := startCmd(t, env, "workflow", "start", writeDef(t, approvalDef), "--wait")
	out := waiter.waitOutput(t, "waiting: approve")
	id, ok := startedID(out)
	if !ok {
		t.Fatalf("start --wait printed %q", out)
	}
	sid := fmt.Sprint(id)
	if e := getExecution(t, env, id); e.Status != "running" || stepOf(&e, "approve").Status != "waiting" {
		t.Fatalf("before the signal: %+v", e)
	}

	out = mustRun(t, env, "workflow", "signal", sid, "approve", "--payload", `{"by":"tester"}`, "--key", "approval-1")
	if want := "signal approve to execution " + sid + ": completed step approve\n"; out != want {
		t.Errorf("workflow signal printed %q, want %q", out, want)
	}
	if err := waiter.result(t); err != nil {
		t.Fatalf("start --wait: %v\nstdout:\n%s", err, waiter.stdout.String())
	}
	mustContain(t, "start --wait output", waiter.stdout.String(), "2/2 steps  completed", "execution "+sid+" completed")
	done := getExecution(t, env, id)
	if out := compactJSON(stepOf(&done, "approve").Output); out != `{"by":"tester"}` {
		t.Errorf("output of the wait step = %s", out)
	}
	mustContain(t, "signal to a completed execution", runErr(t, env, "workflow", "signal", sid, "approve"), "409")
	mustContain(t, "bad payload", runErr(t, env, "workflow", "signal", sid, "approve", "--payload", "yes"), "--payload", "JSON")
	mustContain(t, "signal without a name", runErr(t, env, "workflow", "signal", sid), "missing NAME")

	// A signal before its step is reached is kept; a repeated key is ignored.
	id2 := startExecution(t, env, `{"name":"later","steps":[
		{"key":"gate","wait":{"signal":"open"}},
		{"key":"second","depends_on":["gate"],"wait":{"signal":"go"}}]}`)
	sid2 := fmt.Sprint(id2)
	out = mustRun(t, env, "workflow", "signal", sid2, "go", "--key", "go-1")
	if want := "signal go to execution " + sid2 + ": kept until a step waits for it\n"; out != want {
		t.Errorf("early signal printed %q, want %q", out, want)
	}
	out = mustRun(t, env, "workflow", "signal", sid2, "go", "--key", "go-1")
	mustContain(t, "repeated signal", out, "ignored", `"go-1"`)
	res := decodeJSON[struct {
		Duplicate bool `json:"duplicate"`
	}](t, mustRun(t, env, "workflow", "signal", sid2, "go", "--key", "go-1", "--json"))
	if !res.Duplicate {
		t.Errorf("signal --json with a used key: duplicate is false")
	}
	out = mustRun(t, env, "workflow", "signal", sid2, "open")
	mustContain(t, "signal", out, "completed step gate")
	waitExecutionStatus(t, env, id2, "completed")
}

func TestClientWorkflowCancel(t *testing.T) {
	t.Parallel()
	f := startWorkflowAPI(t)
	env := f.env(cliWriteToken)

	// Waiting for an execution that is cancelled fails.
	waiter := startCmd(t, env, "workflow", "start", writeDef(t, approvalDef), "--wait")
	out := waiter.waitOutput(t, "waiting: approve")
	id, _ := startedID(out)
	sid := fmt.Sprint(id)

	out = mustRun(t, env, "workflow", "cancel", sid)
	if want := "execution " + sid + ": cancelled\n"; out != want {
		t.Errorf("workflow cancel printed %q, want %q", out, want)
	}
	err := waiter.result(t)
	if err == nil {
		t.Fatalf("start --wait of a cancelled execution succeeded:\n%s", waiter.stdout.String())
	}
	mustContain(t, "error of start --wait", err.Error(), "execution "+sid+" cancelled")
	mustContain(t, "output of start --wait", waiter.stdout.String(), "cancelled")

	e := getExecution(t, env, id)
	if e.Status != "cancelled" || stepOf(&e, "approve").Status != "cancelled" || stepOf(&e, "deploy").Status != "cancelled" {
		t.Errorf("after cancel: %+v", e)
	}
	mustContain(t, "second cancel", runErr(t, env, "workflow", "cancel", sid), "409")
}

func TestClientWorkflowStopWaiting(t *testing.T) {
	t.Parallel()
	f := startWorkflowAPI(t)
	env := f.env(cliWriteToken)

	waiter := startCmd(t, env, "workflow", "start", writeDef(t, approvalDef), "--wait")
	out := waiter.waitOutput(t, "waiting: approve")
	id, _ := startedID(out)
	waiter.cancel() // Ctrl-C
	err := waiter.result(t)
	if err == nil {
		t.Fatal("start --wait returned no error when its context ended")
	}
	mustContain(t, "error of an interrupted wait", err.Error(), fmt.Sprintf("stopped waiting for execution %d", id), "running")
	// The execution goes on.
	if e := getExecution(t, env, id); e.Status != "running" {
		t.Errorf("after the wait stopped the execution is %s, want running", e.Status)
	}
}

func TestClientWorkflowFailure(t *testing.T) {
	t.Parallel()
	f := startWorkflowAPI(t)
	env := f.env(cliWriteToken)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stdout, _, err := runCmd(ctx, env, "workflow", "start", writeDef(t, failingDef), "--wait")
	if err == nil {
		t.Fatalf("start --wait of a failing workflow succeeded:\n%s", stdout)
	}
	id, ok := startedID(stdout)
	if !ok {
		t.Fatalf("start --wait printed %q", stdout)
	}
	mustContain(t, "error of a failed execution", err.Error(), fmt.Sprintf("execution %d failed", id), "step fetch failed")
	mustContain(t, "output of a failed execution", stdout, fmt.Sprintf("execution %d failed", id), "step fetch failed (attempt 1): ", "failed")

	e := getExecution(t, env, id)
	if e.Status != "failed" || stepOf(&e, "fetch").Status != "failed" || stepOf(&e, "after").Status != "skipped" {
		t.Errorf("failed execution = %+v", e)
	}
	out := mustRun(t, env, "workflow", "get", fmt.Sprint(id))
	if row := tableRow(out, "fetch"); !strings.Contains(row, "failed") || strings.HasSuffix(strings.TrimSpace(row), " -") {
		t.Errorf("workflow get: the row of the failed step shows no error: %q\n%s", row, out)
	}
	mustContain(t, "workflow get of a failed execution", out, "error:", "step fetch failed")

	// retry: the failed step runs again (and fails again).
	// (The refused request may fail the step again before the answer.)
	out = mustRun(t, env, "workflow", "retry", fmt.Sprint(id))
	if want := fmt.Sprintf("execution %d: ", id); !strings.HasPrefix(out, want) {
		t.Errorf("workflow retry printed %q, want %q and a status", out, want)
	}
	waitExecutionCond(t, env, id, "failed again", func(e *executionView) bool {
		return e.Status == "failed" && stepOf(e, "fetch").Status == "failed"
	})
	mustContain(t, "history after retry", mustRun(t, env, "workflow", "history", fmt.Sprint(id)), "execution_retried")
}

func TestClientWorkflowPauseResumeRetry(t *testing.T) {
	t.Parallel()
	f := startWorkflowAPI(t)
	env := f.env(cliWriteToken)

	// Pause while the gate waits: the step after it is held until resume.
	id := startExecution(t, env, approvalDef)
	sid := fmt.Sprint(id)
	waitExecutionCond(t, env, id, "approve waiting", func(e *executionView) bool { return stepOf(e, "approve").Status == "waiting" })
	if out := mustRun(t, env, "workflow", "pause", sid); out != "execution "+sid+": paused\n" {
		t.Errorf("workflow pause printed %q", out)
	}
	mustRun(t, env, "workflow", "signal", sid, "approve")
	held := waitExecutionCond(t, env, id, "deploy held", func(e *executionView) bool { return stepOf(e, "deploy").Status == "ready" })
	if held.Status != "paused" {
		t.Errorf("while paused the execution is %s", held.Status)
	}
	mustContain(t, "a second pause", runErr(t, env, "workflow", "pause", sid), "409")
	// (deploy, a no-op, may be done before the answer.)
	if e := decodeJSON[executionView](t, mustRun(t, env, "workflow", "resume", sid, "--json")); e.ID != id || (e.Status != "running" && e.Status != "completed") {
		t.Errorf("workflow resume --json = %+v", e)
	}
	waitExecutionStatus(t, env, id, "completed")

	// Retry of a cancelled execution runs its steps again.
	id2 := startExecution(t, env, approvalDef)
	sid2 := fmt.Sprint(id2)
	mustRun(t, env, "workflow", "cancel", sid2)
	if out := mustRun(t, env, "workflow", "retry", sid2); out != "execution "+sid2+": running\n" {
		t.Errorf("workflow retry printed %q", out)
	}
	waitExecutionCond(t, env, id2, "approve waiting again", func(e *executionView) bool { return stepOf(e, "approve").Status == "waiting" })
	mustRun(t, env, "workflow", "signal", sid2, "approve")
	waitExecutionStatus(t, env, id2, "completed")
	mustContain(t, "retry of a completed execution", runErr(t, env, "workflow", "retry", sid2), "409")
}

func TestClientWorkflowIdempotencyKey(t *testing.T) {
	t.Parallel()
	f := startWorkflowAPI(t)
	env := f.env(cliWriteToken)
	def := `{"name":"once","idempotency_key":"file-key","steps":[{"key":"a","task":{"type":"noop"}}]}`

	first := startExecution(t, env, def)
	out := mustRun(t, env, "workflow", "start", writeDef(t, def))
	mustContain(t, "second start with the file's key", out, fmt.Sprintf("already started (idempotency key file-key) execution %d:", first))

	// --idempotency-key replaces the file's.
	second := startExecution(t, env, def, "--idempotency-key", "flag-key")
	if second == first {
		t.Fatalf("--idempotency-key did not replace the file's key: execution %d again", first)
	}
	if e := getExecution(t, env, second); e.IdempotencyKey != "flag-key" {
		t.Errorf("idempotency_key = %q, want flag-key", e.IdempotencyKey)
	}
	out = mustRun(t, env, "workflow", "start", writeDef(t, def), "--idempotency-key", "flag-key", "--json")
	if e := decodeJSON[executionView](t, out); e.ID != second {
		t.Errorf("start --json with a used key returned execution %d, want %d", e.ID, second)
	}
}

func TestClientWorkflowInvalidDefinition(t *testing.T) {
	t.Parallel()
	f := startWorkflowAPI(t)
	env := f.env(cliWriteToken)

	msg := runErr(t, env, "workflow", "start", writeDef(t, `{"name":"","steps":[
		{"key":"a","task":{"type":"frobnicate"}},
		{"key":"a","depends_on":["zz"],"delay":{"duration":"1s"}},
		{"key":"c","wait":{"signal":"ok"},"delay":{"duration":"1s"}}]}`))
	mustContain(t, "error of an invalid definition", msg, "422",
		"name: is required", "steps[0].task.type", "steps[1].key", "steps[1].depends_on[0]", "steps[2].kind")

	// Checked before any request.
	mustContain(t, "not JSON", runErr(t, env, "workflow", "start", writeDef(t, "{\n  \"name\": \"x\",\n  steps: []\n}")),
		"is not valid JSON", "line 3, column 3")
	mustContain(t, "not an object", runErr(t, env, "workflow", "start", writeDef(t, `[1,2]`)), "JSON object")
	mustContain(t, "null", runErr(t, env, "workflow", "start", writeDef(t, `null`)), "JSON object")
	mustContain(t, "empty file", runErr(t, env, "workflow", "start", writeDef(t, " \n")), "is empty")
	mustContain(t, "missing file", runErr(t, env, "workflow", "start", filepath.Join(t.TempDir(), "nope.json")), "no such file")
	mustContain(t, "no file", runErr(t, env, "workflow", "start"), "missing FILE")

	var n int
	if err := f.pool.QueryRow(t.Context(), `SELECT count(*) FROM switchyard_execution`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("refused starts left %d executions", n)
	}
}

// recordingAPI is a stub API that answers POST /v1/workflows with an
// execution and records the bodies it got.
type recordingAPI struct {
	url    string
	mu     sync.Mutex
	bodies []string
}

func startRecordingAPI(t *testing.T) *recordingAPI {
	t.Helper()
	r := &recordingAPI{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, string(body))
		r.mu.Unlock()
		if req.Method != http.MethodPost || req.URL.Path != "/v1/workflows" {
			http.NotFound(w, req)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, `{"id":7,"name":"stub","status":"running","steps_total":1,"steps_final":0,"progress":0,"created_at":"2026-01-02T15:04:05Z"}`)
	}))
	t.Cleanup(ts.Close)
	r.url = ts.URL
	return r
}

func (r *recordingAPI) lastBody(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bodies) == 0 {
		t.Fatal("the API got no request")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.bodies[len(r.bodies)-1]), &m); err != nil {
		t.Fatalf("request body %q: %v", r.bodies[len(r.bodies)-1], err)
	}
	return m
}

func TestClientWorkflowStartBody(t *testing.T) {
	t.Parallel()
	stub := startRecordingAPI(t)
	env := map[string]string{"SWITCHYARD_URL": stub.url, "SWITCHYARD_TOKEN": cliWriteToken, "SWITCHYARD_IDEMPOTENCY_KEY": "from-env"}
	def := writeDef(t, `{"name":"x","idempotency_key":"file-key","future_field":{"a":1},"steps":[{"key":"a","task":{"type":"noop"}}]}`)

	out := mustRun(t, env, "workflow", "start", def)
	if out != "started execution 7: name=stub status=running steps=1\n" {
		t.Errorf("start printed %q", out)
	}
	body := stub.lastBody(t)
	if string(body["idempotency_key"]) != `"file-key"` || string(body["future_field"]) != `{"a":1}` {
		t.Errorf("without --idempotency-key the body is %v; want the file's key (not the environment's) and every field", body)
	}

	mustRun(t, env, "workflow", "start", def, "--idempotency-key", "flag-key")
	if body := stub.lastBody(t); string(body["idempotency_key"]) != `"flag-key"` || string(body["future_field"]) != `{"a":1}` || string(body["name"]) != `"x"` {
		t.Errorf("with --idempotency-key the body is %v", body)
	}
	mustRun(t, env, "workflow", "start", "--idempotency-key=", def)
	if body := stub.lastBody(t); body["idempotency_key"] != nil || body["steps"] == nil {
		t.Errorf("with an empty --idempotency-key the body is %v; want no key", body)
	}
}

// TestClientWorkflowStartStdin is not parallel: it sets workflowStdin, and
// Go runs parallel tests only after the sequential ones.
func TestClientWorkflowStartStdin(t *testing.T) {
	stub := startRecordingAPI(t)
	env := map[string]string{"SWITCHYARD_URL": stub.url, "SWITCHYARD_TOKEN": cliWriteToken}
	saved := workflowStdin
	t.Cleanup(func() { workflowStdin = saved })

	workflowStdin = strings.NewReader(`{"name":"from-stdin","steps":[{"key":"a","task":{"type":"noop"}}]}`)
	mustContain(t, "start -", mustRun(t, env, "workflow", "start", "-"), "started execution 7")
	if body := stub.lastBody(t); string(body["name"]) != `"from-stdin"` {
		t.Errorf("start - sent %v", body)
	}
	workflowStdin = strings.NewReader(`{"name":`)
	mustContain(t, "start - of bad JSON", runErr(t, env, "workflow", "start", "-"), "standard input is not valid JSON")
}

func TestClientWorkflowProgress(t *testing.T) {
	t.Parallel()
	e := &executionView{Status: "running", StepsTotal: 9, Steps: []stepView{
		{Key: "a", Status: "completed"}, {Key: "b", Status: "completed"}, {Key: "c", Status: "skipped"}, {Key: "d", Status: "failed"},
		{Key: "configure-proxy", Status: "running"}, {Key: "approve", Status: "waiting"}, {Key: "e", Status: "ready"},
		{Key: "f", Status: "pending"}, {Key: "g", Status: "pending"},
	}}
	if got, want := progressLine(e, ""), "[########------------] 4/9 steps  running: configure-proxy  queued: e  waiting: approve"; got != want {
		t.Errorf("progressLine = %q\nwant            %q", got, want)
	}
	if got, want := progressLine(&executionView{Status: "paused", StepsTotal: 3, StepsFinal: 3}, "2s"), "[####################] 3/3 steps  2s  paused"; got != want {
		t.Errorf("progressLine without steps = %q, want %q", got, want)
	}
	if got, want := progressLine(&executionView{Status: "pending"}, ""), "[--------------------] 0/0 steps  pending"; got != want {
		t.Errorf("progressLine of no steps = %q, want %q", got, want)
	}

	// On a terminal one line is redrawn, padded over a longer previous one,
	// only when it changes, and truncated to the width.
	var buf bytes.Buffer
	p := &progress{w: &buf, tty: true, columns: 60, start: time.Now()}
	long := &executionView{Status: "running", Steps: []stepView{{Key: strings.Repeat("x", 80), Status: "running"}, {Key: "b", Status: "pending"}}}
	short := &executionView{Status: "running", Steps: []stepView{{Key: "a", Status: "completed"}, {Key: "b", Status: "running"}}}
	p.update(long)
	p.update(long)
	p.update(short)
	p.end()
	draws := strings.Split(buf.String(), "\r")
	if len(draws) != 3 || draws[0] != "" {
		t.Fatalf("terminal output %q: want two draws", buf.String())
	}
	first, second := draws[1], strings.TrimSuffix(draws[2], "\n")
	if n := len([]rune(first)); n != 59 || !strings.HasSuffix(first, "…") {
		t.Errorf("first draw %q has %d runes, want 59 ending in …", first, n)
	}
	if len([]rune(second)) != 59 || !strings.HasPrefix(second, "[##########----------] 1/2 steps  <1s  running: b") || strings.TrimRight(second, " ") == second {
		t.Errorf("second draw %q: want the new line padded to 59 runes", second)
	}
	if !strings.HasSuffix(buf.String(), "\n") {
		t.Errorf("terminal output does not end the line: %q", buf.String())
	}

	// Elsewhere, a line per change of the step statuses.
	buf.Reset()
	p = &progress{w: &buf}
	p.update(short)
	p.update(short)
	p.update(long)
	p.end()
	if got := strings.Count(buf.String(), "\n"); got != 2 || strings.Contains(buf.String(), "\r") {
		t.Errorf("pipe output %q: want two lines", buf.String())
	}
}

func TestClientWorkflowUsage(t *testing.T) {
	t.Parallel()
	env := map[string]string{}
	mustContain(t, "workflow help", mustRun(t, env, "workflow", "help"), "workflow start", "--wait", "workflow signal", "workflow retry")
	mustContain(t, "usage", mustRun(t, env, "help"), "switchyard workflow")
	mustContain(t, "workflow without subcommand", runErr(t, env, "workflow"), "missing subcommand")
	mustContain(t, "unknown subcommand", runErr(t, env, "workflow", "frob"), `unknown subcommand "frob"`)
	for _, sub := range []string{"get", "history", "cancel", "pause", "resume", "retry", "signal"} {
		mustContain(t, sub+" without id", runErr(t, env, "workflow", sub), "missing ID")
	}
	mustContain(t, "bad id", runErr(t, env, "workflow", "cancel", "0"), "execution id")
	mustContain(t, "two ids", runErr(t, env, "workflow", "get", "1", "2"), "unexpected arguments")
	if _, stderr, err := runCmd(t.Context(), env, "workflow", "start", "-h"); err != nil || !strings.Contains(stderr, "idempotency-key") || !strings.Contains(stderr, "standard input") {
		t.Errorf("workflow start -h: err %v, stderr:\n%s", err, stderr)
	}
}
