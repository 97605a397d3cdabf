package api

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard/switchyard/metrics"
	"github.com/switchyard/switchyard/processing"
	"github.com/switchyard/switchyard/workflow"
)

// startWorker runs a worker pod on the bundle's database: the built-in
// handlers and the workflow engine's, with the engine recording step
// outcomes. It stops at cleanup.
func (b *testBundle) startWorker(t *testing.T) {
	t.Helper()
	m, err := metrics.New(prometheus.NewRegistry(), "test")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := processing.New(processing.Config{
		ID:                "api-test-worker",
		Queues:            map[string]int{"default": 10},
		Guard:             processing.GuardConfig{Mode: processing.GuardOff},
		FetchPollInterval: 50 * time.Millisecond,
		ShutdownTimeout:   time.Second,
	}, processing.Deps{Pool: b.pool, Registry: b.registry, Handlers: b.mux, Metrics: m, Workflow: b.workflows})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if err := svc.Stop(ctx); err != nil {
				t.Errorf("stop worker: %v", err)
			}
		})
	})
}

// startExecution starts def through the API and returns the execution.
func (b *testBundle) startExecution(t *testing.T, def string) workflow.Execution {
	t.Helper()
	res, data := b.do(t, "POST", "/v1/workflows", writeToken, def)
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("start: %d %s", res.StatusCode, data)
	}
	return decode[workflow.Execution](t, data)
}

// getExecution reads an execution through the API.
func (b *testBundle) getExecution(t *testing.T, id int64) workflow.Execution {
	t.Helper()
	res, data := b.do(t, "GET", "/v1/executions/"+itoa(id), readToken, "")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("get execution %d: %d %s", id, res.StatusCode, data)
	}
	return decode[workflow.Execution](t, data)
}

// waitExecution polls the execution through the API until cond holds.
func (b *testBundle) waitExecution(t *testing.T, id int64, what string, cond func(workflow.Execution) bool) workflow.Execution {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		e := b.getExecution(t, id)
		if cond(e) {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution %d: timed out waiting for %s; now %+v", id, what, e)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func stepOf(t *testing.T, e workflow.Execution, key string) workflow.StepState {
	t.Helper()
	for _, s := range e.Steps {
		if s.Key == key {
			return s
		}
	}
	t.Fatalf("execution %d has no step %q: %+v", e.ID, key, e.Steps)
	return workflow.StepState{}
}

// executionCount counts the executions in the database.
func (b *testBundle) executionCount(t testing.TB) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(t.Context(), `SELECT count(*) FROM switchyard_execution`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// approvalDef is noop → wait for "approval" → noop.
const approvalDef = `{"name":"approval","input":{"model":"m1"},"steps":[
	{"key":"prepare","task":{"type":"noop"}},
	{"key":"approve","depends_on":["prepare"],"wait":{"signal":"approval","timeout":"1h"}},
	{"key":"deploy","depends_on":["approve"],"task":{"type":"noop","priority":2,"retry":{"max_attempts":3}}}
]}`

// waitDef waits for two signals, no worker needed.
const waitDef = `{"name":"%s","steps":[{"key":"approve","wait":{"signal":"approval"}},{"key":"hold","wait":{"signal":"release"}}]}`

func TestWorkflowRunsToCompletion(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.startWorker(t)

	res, data := b.do(t, "POST", "/v1/workflows", writeToken, approvalDef)
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("start: %d %s", res.StatusCode, data)
	}
	started := decode[workflow.Execution](t, data)
	if loc := res.Header.Get("Location"); loc != "/v1/executions/"+itoa(started.ID) {
		t.Errorf("Location = %q", loc)
	}
	if started.Name != "approval" || started.StepsTotal != 3 || len(started.Steps) != 3 || !strings.Contains(string(started.Input), "m1") {
		t.Fatalf("started = %s", data)
	}
	// The worker may have run prepare already.
	if s := stepOf(t, started, "approve"); s.Kind != "wait" || (s.Status != workflow.StepPending && s.Status != workflow.StepWaiting) || len(s.DependsOn) != 1 {
		t.Errorf("approve right after the start: %+v", s)
	}

	waiting := b.waitExecution(t, started.ID, "the wait", func(e workflow.Execution) bool {
		return len(e.Steps) == 3 && e.Steps[1].Status == workflow.StepWaiting
	})
	if s := stepOf(t, waiting, "prepare"); s.Status != workflow.StepCompleted || s.TaskID == nil || s.Attempt != 1 {
		t.Errorf("prepare: %+v", s)
	}
	if waiting.Progress <= 0 || waiting.Progress >= 1 {
		t.Errorf("progress while waiting = %v", waiting.Progress)
	}

	res, data = b.do(t, "POST", "/v1/executions/"+itoa(started.ID)+"/signals/approval", writeToken, `{"payload":{"by":"alice"}}`)
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("signal: %d %s", res.StatusCode, data)
	}
	if sr := decode[workflow.SignalResult](t, data); sr.Duplicate || sr.ConsumedBy != "approve" {
		t.Errorf("signal result %s, want consumed by approve", data)
	}

	done := b.waitExecution(t, started.ID, "completion", func(e workflow.Execution) bool { return e.Status == workflow.StatusCompleted })
	if done.Progress != 1 || done.StepsFinal != 3 || done.FinishedAt == nil {
		t.Errorf("completed execution: %+v", done)
	}
	if out := string(stepOf(t, done, "approve").Output); !strings.Contains(out, "alice") {
		t.Errorf("approve output %s, want the signal's payload", out)
	}

	// History: in order, from the start to the end.
	type history struct {
		Events []workflow.Event `json:"events"`
	}
	path := "/v1/executions/" + itoa(started.ID) + "/history"
	res, data = b.do(t, "GET", path, readToken, "")
	h := decode[history](t, data)
	if res.StatusCode != 200 || len(h.Events) < 6 {
		t.Fatalf("history: %d %s", res.StatusCode, data)
	}
	for i := 1; i < len(h.Events); i++ {
		if h.Events[i].ID <= h.Events[i-1].ID {
			t.Errorf("history out of order at %d: %d after %d", i, h.Events[i].ID, h.Events[i-1].ID)
		}
	}
	if first, last := h.Events[0], h.Events[len(h.Events)-1]; first.Type != "execution_started" || last.Type != "execution_completed" {
		t.Errorf("history runs from %s to %s", first.Type, last.Type)
	}
	seen := map[string]bool{}
	for _, ev := range h.Events {
		seen[ev.Type+"/"+ev.Step] = true
	}
	for _, want := range []string{"signal_received/", "step_completed/prepare", "step_completed/approve", "step_completed/deploy"} {
		if !seen[want] {
			t.Errorf("history lacks %s: %s", want, data)
		}
	}
	// Paging with after and limit.
	_, data = b.do(t, "GET", path+"?after="+itoa(h.Events[0].ID)+"&limit=2", readToken, "")
	if page := decode[history](t, data); len(page.Events) != 2 || page.Events[0].ID != h.Events[1].ID || page.Events[1].ID != h.Events[2].ID {
		t.Errorf("history after the first, limit 2: %s", data)
	}
	_, data = b.do(t, "GET", path+"?after="+itoa(h.Events[len(h.Events)-1].ID), readToken, "")
	if string(data) != "{\"events\":[]}\n" {
		t.Errorf("history after the last = %s, want an empty list", data)
	}
	for _, q := range []string{"?after=-1", "?after=x", "?limit=0", "?limit=5001", "?limit=x"} {
		res, data := b.do(t, "GET", path+q, readToken, "")
		expectProblem(t, res, data, 400, "invalid-parameter")
	}
}

func TestWorkflowSignals(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	exec := b.startExecution(t, strings.ReplaceAll(waitDef, "%s", "signals"))
	if s := stepOf(t, exec, "approve"); s.Status != workflow.StepWaiting {
		t.Fatalf("a root wait step is %s, want waiting", s.Status)
	}
	path := "/v1/executions/" + itoa(exec.ID) + "/signals/"
	signal := func(token, name, body string, header ...string) (*http.Response, workflow.SignalResult, []byte) {
		t.Helper()
		res, data := b.do(t, "POST", path+name, token, body, header...)
		var sr workflow.SignalResult
		if res.StatusCode == http.StatusAccepted {
			sr = decode[workflow.SignalResult](t, data)
		}
		return res, sr, data
	}

	// The header's key is the signal's key: the same request again is
	// replayed by the API, and another token's request with the key is a
	// duplicate for the engine.
	res1, sr, data1 := signal(writeToken, "approval", `{"payload":{"by":"alice"}}`, "Idempotency-Key", "sig-1")
	if res1.StatusCode != 202 || sr.Duplicate || sr.ConsumedBy != "approve" {
		t.Fatalf("first signal: %d %s", res1.StatusCode, data1)
	}
	res2, _, data2 := signal(writeToken, "approval", `{"payload":{"by":"alice"}}`, "Idempotency-Key", "sig-1")
	if res2.StatusCode != 202 || res2.Header.Get("Idempotent-Replayed") != "true" || string(data2) != string(data1) {
		t.Errorf("repeat: %d %s (replayed %q)", res2.StatusCode, data2, res2.Header.Get("Idempotent-Replayed"))
	}
	if res, sr, data := signal(adminToken, "approval", `{"payload":{"by":"mallory"}}`, "Idempotency-Key", "sig-1"); res.StatusCode != 202 || !sr.Duplicate {
		t.Errorf("same key from another token: %d %s, want a duplicate", res.StatusCode, data)
	}
	// The body's key wins over the header; no step waits for the signal
	// now, so it is kept.
	if res, sr, data := signal(writeToken, "approval", `{"idempotency_key":"sig-2"}`); res.StatusCode != 202 || sr.Duplicate || sr.ConsumedBy != "" {
		t.Errorf("kept signal: %d %s", res.StatusCode, data)
	}
	if res, sr, data := signal(writeToken, "approval", `{"idempotency_key":"sig-2","payload":[1]}`, "Idempotency-Key", "other"); res.StatusCode != 202 || !sr.Duplicate {
		t.Errorf("repeated body key: %d %s, want a duplicate", res.StatusCode, data)
	}
	e := b.getExecution(t, exec.ID)
	if s := stepOf(t, e, "approve"); s.Status != workflow.StepCompleted || !strings.Contains(string(s.Output), "alice") {
		t.Errorf("approve after the signal: %+v", s)
	}

	// Bad input.
	res, _, data := signal(writeToken, "bad%20name", "")
	expectProblem(t, res, data, 400, "invalid-parameter", "name")
	res, _, data = signal(writeToken, "approval", `{"payload":1,"colour":"red"}`)
	expectProblem(t, res, data, 422, "validation-failed", "colour")
	res, _, data = signal(writeToken, "approval", `{"payload":`)
	expectProblem(t, res, data, 400, "malformed-json")
	res, _, data = signal(writeToken, "approval", `{"idempotency_key":"`+strings.Repeat("k", 256)+`"}`)
	expectProblem(t, res, data, 422, "validation-failed", "idempotency_key")
	res, _, data = signal(writeToken, "approval", `{"payload":{"note":"a\u0000b"}}`)
	expectProblem(t, res, data, 422, "validation-failed", "payload.note")

	// The last wait completes the execution; then signals are refused.
	if res, sr, data := signal(writeToken, "release", ""); res.StatusCode != 202 || sr.ConsumedBy != "hold" {
		t.Fatalf("release: %d %s", res.StatusCode, data)
	}
	if e := b.getExecution(t, exec.ID); e.Status != workflow.StatusCompleted {
		t.Errorf("status after both signals: %s", e.Status)
	}
	res, _, data = signal(writeToken, "release", "")
	expectProblem(t, res, data, 409, "invalid-state")
}

func TestWorkflowIdempotentStart(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	def := `{"name":"once","idempotency_key":"deploy-42","steps":[{"key":"a","wait":{"signal":"go"}}]}`
	first := b.startExecution(t, def)
	res, data := b.do(t, "POST", "/v1/workflows", writeToken, def)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("repeat start: %d %s, want 200", res.StatusCode, data)
	}
	again := decode[workflow.Execution](t, data)
	if again.ID != first.ID || again.IdempotencyKey != "deploy-42" || len(again.Steps) != 1 {
		t.Errorf("repeat start returned %s, want execution %d with its steps", data, first.ID)
	}
	if loc := res.Header.Get("Location"); loc != "/v1/executions/"+itoa(first.ID) {
		t.Errorf("Location = %q", loc)
	}
	if n := b.executionCount(t); n != 1 {
		t.Errorf("%d executions, want 1", n)
	}
}

func TestWorkflowInvalidDefinition(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, tc := range []struct {
		name, body string
		status     int
		typ        string
		fields     []string
	}{
		{"every problem", `{"name":"","steps":[
			{"key":"a","depends_on":["b"],"task":{"type":"noop"}},
			{"key":"b","depends_on":["a"],"task":{"type":"noop"}},
			{"key":"a","task":{"type":"noop"}},
			{"key":"c","depends_on":["nope"],"task":{"type":"no.such.type"}},
			{"key":"d","delay":{"duration":"-1s"}},
			{"key":"e","wait":{}},
			{"key":"f"},
			{"key":"g","task":{"type":"sleep","args":{"duration":5}}},
			{"key":"h","workflow":{"name":"child","idempotency_key":"x","steps":[{"key":"c1","task":{"type":"nope"}}]}},
			{"key":"i","task":{"type":"switchyard.workflow"}}
		]}`, 422, "validation-failed", []string{
			"name", "steps[2].key", "steps[3].depends_on[0]", "steps[3].task.type", "steps[4].delay.duration",
			"steps[5].wait.signal", "steps[6].kind", "steps[7].task.args.duration", "steps[8].workflow.idempotency_key",
			"steps[8].workflow.steps[0].task.type", "steps[9].task.type", "steps",
		}},
		{"decoding problems", `{"name":"x","colour":1,"timeout":5,"steps":[{"key":"a","task":{"type":"noop","timeout":"soon","priority":"high","extra":true}},{"key":"b","delay":{"until":"tomorrow"}}]}`,
			422, "validation-failed", []string{"colour", "timeout", "steps[0].task.timeout", "steps[0].task.priority", "steps[0].task.extra", "steps[1].delay.until"}},
		{"one unknown nested field", `{"name":"x","steps":[{"key":"a","wait":{"signal":"s","sigal":"t"}}]}`, 422, "validation-failed", []string{"steps[0].wait.sigal"}},
		{"NUL", `{"name":"a\u0000","input":{"k\u0000":1},"steps":[{"key":"a","wait":{"signal":"s"}}]}`, 422, "validation-failed", []string{"name", `input["k\x00"]`}},
		{"steps not a list", `{"name":"x","steps":{}}`, 422, "validation-failed", []string{"steps"}},
		{"malformed", `{"name":`, 400, "malformed-json", nil},
		{"not an object", `[]`, 400, "malformed-json", nil},
		{"empty", ``, 400, "malformed-json", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, data := b.do(t, "POST", "/v1/workflows", writeToken, tc.body)
			p := expectProblem(t, res, data, tc.status, tc.typ)
			got := map[string]bool{}
			for _, e := range p.Errors {
				got[e.Field] = true
			}
			for _, f := range tc.fields {
				if !got[f] {
					t.Errorf("no error for %s; got %s", f, data)
				}
			}
			if tc.status == 422 && len(p.Errors) < len(tc.fields) {
				t.Errorf("%d errors, want at least %d: %s", len(p.Errors), len(tc.fields), data)
			}
			if tc.name == "every problem" && len(p.KnownTypes) != 3 {
				t.Errorf("known types %v, want the 3 built-ins", p.KnownTypes)
			}
		})
	}
	if n := b.executionCount(t); n != 0 {
		t.Errorf("invalid definitions wrote %d executions", n)
	}
	if n := b.taskCount(t); n != 0 {
		t.Errorf("invalid definitions wrote %d tasks", n)
	}
}

func TestExecutionListAndControls(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	e1 := b.startExecution(t, strings.ReplaceAll(waitDef, "%s", "alpha"))
	e2 := b.startExecution(t, strings.ReplaceAll(waitDef, "%s", "alpha"))
	e3 := b.startExecution(t, strings.ReplaceAll(waitDef, "%s", "beta"))

	control := func(id int64, action string, status int) workflow.Execution {
		t.Helper()
		res, data := b.do(t, "POST", "/v1/executions/"+itoa(id)+"/"+action, writeToken, "")
		if status != 200 {
			expectProblem(t, res, data, status, "invalid-state")
			return workflow.Execution{}
		}
		if res.StatusCode != 200 {
			t.Fatalf("%s %d: %d %s", action, id, res.StatusCode, data)
		}
		return decode[workflow.Execution](t, data)
	}
	if e := control(e1.ID, "cancel", 200); e.Status != workflow.StatusCancelled || stepOf(t, e, "approve").Status != workflow.StepCancelled {
		t.Errorf("after cancel: %+v", e)
	}
	control(e1.ID, "cancel", 409)
	control(e1.ID, "pause", 409)
	if e := control(e2.ID, "pause", 200); e.Status != workflow.StatusPaused {
		t.Errorf("after pause: %s", e.Status)
	}
	control(e2.ID, "pause", 409)
	if e := control(e2.ID, "resume", 200); e.Status != workflow.StatusRunning {
		t.Errorf("after resume: %s", e.Status)
	}
	control(e2.ID, "resume", 409)
	control(e3.ID, "retry", 409)

	type page struct {
		Executions []workflow.Execution `json:"executions"`
		NextCursor string               `json:"next_cursor"`
	}
	ids := func(query string) []int64 {
		t.Helper()
		res, data := b.do(t, "GET", "/v1/executions"+query, readToken, "")
		if res.StatusCode != 200 {
			t.Fatalf("list %q: %d %s", query, res.StatusCode, data)
		}
		if strings.Contains(string(data), `"steps":`) {
			t.Errorf("list %q shows steps: %s", query, data)
		}
		var out []int64
		for _, e := range decode[page](t, data).Executions {
			out = append(out, e.ID)
		}
		return out
	}
	for query, want := range map[string][]int64{
		"":                                   {e3.ID, e2.ID, e1.ID},
		"?status=cancelled":                  {e1.ID},
		"?status=running":                    {e3.ID, e2.ID},
		"?status=running&status=cancelled":   {e3.ID, e2.ID, e1.ID},
		"?name=alpha":                        {e2.ID, e1.ID},
		"?name=beta&status=running":          {e3.ID},
		"?status=completed":                  nil,
		"?name=alpha&status=running&limit=5": {e2.ID},
	} {
		if got := ids(query); !equalIDs(got, want) {
			t.Errorf("list %q = %v, want %v", query, got, want)
		}
	}
	// Pagination walks every execution once, newest first.
	var walked []int64
	cursor := ""
	for range 5 {
		res, data := b.do(t, "GET", "/v1/executions?limit=2&cursor="+cursor, readToken, "")
		if res.StatusCode != 200 {
			t.Fatalf("page: %d %s", res.StatusCode, data)
		}
		p := decode[page](t, data)
		for _, e := range p.Executions {
			walked = append(walked, e.ID)
		}
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if !equalIDs(walked, []int64{e3.ID, e2.ID, e1.ID}) {
		t.Errorf("pagination walked %v", walked)
	}

	// Retry re-runs the cancelled execution.
	if e := control(e1.ID, "retry", 200); e.Status != workflow.StatusRunning || stepOf(t, e, "approve").Status != workflow.StepWaiting {
		t.Errorf("after retry: %+v", e)
	}
	if got := ids("?status=cancelled"); len(got) != 0 {
		t.Errorf("cancelled after the retry: %v", got)
	}

	for _, q := range []string{"?status=done", "?limit=0", "?limit=501", "?limit=x", "?cursor=garbage"} {
		res, data := b.do(t, "GET", "/v1/executions"+q, readToken, "")
		expectProblem(t, res, data, 400, "invalid-parameter")
	}
	for _, rq := range []struct{ method, path string }{
		{"GET", "/v1/executions/999999"},
		{"GET", "/v1/executions/999999/history"},
		{"POST", "/v1/executions/999999/signals/approval"},
		{"POST", "/v1/executions/999999/cancel"},
		{"POST", "/v1/executions/999999/pause"},
		{"POST", "/v1/executions/999999/resume"},
		{"POST", "/v1/executions/999999/retry"},
	} {
		res, data := b.do(t, rq.method, rq.path, writeToken, "")
		if p := expectProblem(t, res, data, 404, "not-found"); p.Title != "Execution not found" {
			t.Errorf("%s %s: title %q", rq.method, rq.path, p.Title)
		}
	}
	for _, path := range []string{"/v1/executions/abc", "/v1/executions/0/history", "/v1/executions/-1/cancel"} {
		method := "GET"
		if strings.HasSuffix(path, "cancel") {
			method = "POST"
		}
		res, data := b.do(t, method, path, writeToken, "")
		expectProblem(t, res, data, 400, "invalid-parameter", "id")
	}
}

func equalIDs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestWorkflowAuth(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	exec := b.startExecution(t, strings.ReplaceAll(waitDef, "%s", "auth"))
	id := itoa(exec.ID)
	def := strings.ReplaceAll(waitDef, "%s", "other")
	for _, tc := range []struct {
		name, method, path, token string
		status                    int
	}{
		{"no token", "GET", "/v1/executions", "", 401},
		{"read cannot start", "POST", "/v1/workflows", readToken, 403},
		{"read cannot signal", "POST", "/v1/executions/" + id + "/signals/approval", readToken, 403},
		{"read cannot cancel", "POST", "/v1/executions/" + id + "/cancel", readToken, 403},
		{"read cannot pause", "POST", "/v1/executions/" + id + "/pause", readToken, 403},
		{"read cannot resume", "POST", "/v1/executions/" + id + "/resume", readToken, 403},
		{"read cannot retry", "POST", "/v1/executions/" + id + "/retry", readToken, 403},
		{"read lists", "GET", "/v1/executions", readToken, 200},
		{"read gets", "GET", "/v1/executions/" + id, readToken, 200},
		{"read reads history", "GET", "/v1/executions/" + id + "/history", readToken, 200},
		{"admin starts", "POST", "/v1/workflows", adminToken, 202},
	} {
		body := ""
		if tc.path == "/v1/workflows" {
			body = def
		}
		res, data := b.do(t, tc.method, tc.path, tc.token, body)
		if res.StatusCode != tc.status {
			t.Errorf("%s: %d, want %d: %s", tc.name, res.StatusCode, tc.status, data)
		}
	}
	if n := b.executionCount(t); n != 2 {
		t.Errorf("%d executions, want 2 (the refused start wrote one?)", n)
	}
	if e := b.getExecution(t, exec.ID); e.Status != workflow.StatusRunning || stepOf(t, e, "approve").Status != workflow.StepWaiting {
		t.Errorf("refused requests changed the execution: %+v", e)
	}
}

func TestEventsStreamExecutions(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: Config{SSEHeartbeat: time.Hour}})
	watched := b.startExecution(t, strings.ReplaceAll(waitDef, "%s", "watched"))
	other := b.startExecution(t, strings.ReplaceAll(waitDef, "%s", "other"))

	res, data := b.do(t, "GET", "/v1/events?execution=abc", readToken, "")
	expectProblem(t, res, data, 400, "invalid-parameter", "execution")

	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", b.server.URL+"/v1/events?execution="+itoa(watched.ID), nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	sc := bufio.NewScanner(stream.Body)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), ":") {
		t.Fatalf("no opening comment: %q", sc.Text())
	}

	// The other execution's events come first and must be filtered out.
	b.do(t, "POST", "/v1/executions/"+itoa(other.ID)+"/cancel", writeToken, "")
	b.do(t, "POST", "/v1/executions/"+itoa(watched.ID)+"/signals/approval", writeToken, `{"payload":{"ok":true}}`)

	var got []string
	event := ""
	for len(got) < 2 && sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
			continue
		}
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok || event != "execution" {
			continue
		}
		var ev struct {
			ID          int64     `json:"id"`
			ExecutionID int64     `json:"execution_id"`
			Type        string    `json:"type"`
			Step        string    `json:"step"`
			At          time.Time `json:"at"`
		}
		if err := json.Unmarshal([]byte(d), &ev); err != nil {
			t.Fatalf("execution event %q: %v", d, err)
		}
		if ev.ExecutionID != watched.ID {
			t.Fatalf("filtered stream sent an event of execution %d: %s", ev.ExecutionID, d)
		}
		if ev.ID < 1 || ev.At.IsZero() {
			t.Errorf("incomplete event %s", d)
		}
		got = append(got, ev.Type+"/"+ev.Step)
	}
	if strings.Join(got, ",") != "signal_received/,step_completed/approve" {
		t.Errorf("streamed %v, want the signal then the step's completion", got)
	}
}
