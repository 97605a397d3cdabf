package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard/switchyard/dbtest"
	"github.com/switchyard/switchyard/jobs"
)

func TestServeEndToEnd(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not on PATH: install the Debian package prometheus (make test does)")
	}
	dbURL := dbtest.NewDatabase(t)
	env := testEnv(t, dbURL)
	client := newJobsClient(t, dbURL)

	var hits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "hello from the target")
	}))
	t.Cleanup(target.Close)

	srv := startServe(t, env)

	// noop, plain output.
	out := mustRun(t, env, "enqueue", "noop")
	var noopID int64
	if _, err := fmt.Sscanf(out, "enqueued task %d:", &noopID); err != nil || noopID <= 0 {
		t.Fatalf("enqueue noop printed %q: cannot read the task id (%v)", out, err)
	}
	for _, want := range []string{"type=noop", "queue=default", "state=queued"} {
		if !strings.Contains(out, want) {
			t.Errorf("enqueue noop printed %q, want it to contain %q", out, want)
		}
	}

	// http.request, JSON output.
	argsJSON, _ := json.Marshal(map[string]string{"url": target.URL + "/ping"})
	out = mustRun(t, env, "enqueue", "http.request", "--args", string(argsJSON), "--json")
	var enq jobs.Task
	if err := json.Unmarshal([]byte(out), &enq); err != nil {
		t.Fatalf("enqueue --json printed %q: not a task: %v", out, err)
	}
	if enq.ID <= 0 || enq.ID == noopID || enq.Type != "http.request" || enq.Queue != "default" {
		t.Fatalf("enqueue --json printed id=%d type=%q queue=%q, want a new http.request task on default", enq.ID, enq.Type, enq.Queue)
	}

	waitTaskState(t, client, noopID, jobs.StateCompleted)
	done := waitTaskState(t, client, enq.ID, jobs.StateCompleted)
	var output struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	}
	if err := json.Unmarshal(done.Output, &output); err != nil {
		t.Fatalf("http.request output %s: %v", done.Output, err)
	}
	if output.Status != http.StatusOK || output.Body != "hello from the target" {
		t.Errorf("http.request output = %+v, want status 200 and the target's body", output)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("target got %d requests, want 1", n)
	}

	if code, body, err := httpGet(t.Context(), srv.base+"/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("GET /healthz: status %d, err %v, body %q", code, err, body)
	}

	// The attempt's counter may be incremented a moment after the task row
	// says completed, so poll for it.
	srv.waitMetric(t, `switchyard_tasks_total{outcome="completed",queue="default",type="noop"} 1`)
	body := srv.waitMetric(t, `switchyard_tasks_total{outcome="completed",queue="default",type="http.request"} 1`)
	for _, want := range []string{
		fmt.Sprintf(`switchyard_workers_max{queue="default"} %d`, 10),
		`switchyard_workers_busy{queue="default"}`,
		`switchyard_queue_tasks{queue="default",state="queued"}`,
		`switchyard_queue_oldest_task_age_seconds{queue="default",state="queued"}`,
		`switchyard_build_info{`,
	} {
		if !hasLine(body, want) && !strings.Contains(body, "\n"+want) {
			t.Errorf("/metrics has no line %s; related lines:\n%s", want, grepLines(body, strings.SplitN(want, "{", 2)[0]))
		}
	}
	// No other outcome was counted for these tasks.
	for _, l := range strings.Split(grepLines(body, "switchyard_tasks_total{"), "\n") {
		if !strings.Contains(l, `outcome="completed"`) && !strings.HasSuffix(l, " 0") {
			t.Errorf("unexpected attempt outcome in /metrics: %s", l)
		}
	}

	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	promOut, err := cmd.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(promOut))) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, promOut)
	}

	// Graceful shutdown: run returns nil, and readiness is gone with it.
	start := time.Now()
	if err := srv.stop(t); err != nil {
		t.Fatalf("serve returned %v after cancellation, want nil\nstderr:\n%s", err, srv.stderr.String())
	}
	t.Logf("serve shut down in %s", time.Since(start).Round(time.Millisecond))
	if _, _, err := httpGet(t.Context(), srv.base+"/readyz"); err == nil {
		t.Errorf("GET /readyz still answers after serve returned")
	}
	// The log is JSON, as SWITCHYARD_LOG_FORMAT asked.
	logs := srv.stderr.String()
	first, _, _ := strings.Cut(logs, "\n")
	if !json.Valid([]byte(first)) {
		t.Errorf("first log line is not JSON: %q", first)
	}
	if !strings.Contains(logs, `"msg":"shut down"`) {
		t.Errorf("serve log has no shut down message:\n%s", logs)
	}
}

// A task still running at cancellation is given the shutdown timeout to
// finish and completes, and run still returns nil. Meanwhile /readyz says
// the pod is going away while /healthz still answers.
func TestServeShutdownLetsRunningTaskFinish(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	env := testEnv(t, dbURL)
	client := newJobsClient(t, dbURL)
	srv := startServe(t, env)

	out := mustRun(t, env, "enqueue", "sleep", "--args", `{"duration":"3s"}`, "--json")
	var task jobs.Task
	if err := json.Unmarshal([]byte(out), &task); err != nil {
		t.Fatalf("enqueue --json printed %q: %v", out, err)
	}
	waitTaskState(t, client, task.ID, jobs.StateInProgress)

	srv.cancel()
	waitFor(t, "GET /readyz to answer 503 during shutdown", func() (bool, string) {
		select {
		case err := <-srv.done:
			srv.done <- err
			t.Fatalf("serve returned (%v) before /readyz was seen failing; the task should have kept it running", err)
		default:
		}
		code, body, err := httpGet(t.Context(), srv.base+"/readyz")
		if err != nil {
			return false, err.Error()
		}
		return code == http.StatusServiceUnavailable && strings.Contains(body, "shutting down"), fmt.Sprintf("%d %s", code, body)
	})
	if code, _, err := httpGet(t.Context(), srv.base+"/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("GET /healthz during shutdown: status %d, err %v; want 200 until the server stops", code, err)
	}

	if err := srv.stop(t); err != nil {
		t.Fatalf("serve returned %v after cancellation, want nil\nstderr:\n%s", err, srv.stderr.String())
	}
	got, err := client.Get(t.Context(), task.ID)
	if err != nil {
		t.Fatalf("Get task: %v", err)
	}
	if got.State != jobs.StateCompleted {
		t.Errorf("task running at shutdown is %s after serve returned, want completed", got.State)
	}
}

// In strict guard mode the pod is not ready while Redis is unreachable (it
// would only snooze tasks), but it is alive; best-effort mode stays ready.
func TestServeReadinessNeedsRedisOnlyWhenStrict(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	deadRedis := "redis://" + freeAddr(t) + "/0"

	strictEnv := testEnv(t, dbURL)
	strictEnv["SWITCHYARD_REDIS_URL"] = deadRedis
	strictEnv["SWITCHYARD_GUARD_MODE"] = "strict"
	strict := startServeUntil(t, "/healthz", strictEnv)
	code, body, err := httpGet(t.Context(), strict.base+"/readyz")
	if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "redis") {
		t.Errorf("strict mode, Redis down: GET /readyz = %d %q (err %v), want 503 naming redis", code, body, err)
	}

	lenientEnv := testEnv(t, dbURL)
	lenientEnv["SWITCHYARD_REDIS_URL"] = deadRedis
	lenient := startServe(t, lenientEnv) // waits for /readyz 200

	for _, s := range []*server{strict, lenient} {
		if err := s.stop(t); err != nil {
			t.Errorf("serve returned %v after cancellation, want nil", err)
		}
	}
}

// An HTTP address already in use is an error, not a pod without metrics.
func TestServeHTTPAddrInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	env := testEnv(t, dbtest.NewDatabase(t))
	env["SWITCHYARD_HTTP_ADDR"] = ln.Addr().String()

	ctx, cancel := context.WithTimeout(t.Context(), pollFor)
	defer cancel()
	_, stderr, err := runCmd(ctx, env, "serve")
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), ln.Addr().String()) {
		t.Errorf("serve on a busy address returned %v (ctx %v), want a prompt error naming the address\nstderr:\n%s", err, ctx.Err(), stderr)
	}
}
