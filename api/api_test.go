package api

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard/switchyard/dbtest"
	"github.com/switchyard/switchyard/events"
	"github.com/switchyard/switchyard/handlers"
	"github.com/switchyard/switchyard/jobs"
	"github.com/switchyard/switchyard/workflow"
)

// Token secrets of the tests.
const (
	readToken  = "reader-secret-0123456789"
	writeToken = "writer-secret-0123456789"
	adminToken = "admin-secret-01234567890"
)

type testBundle struct {
	pool      *pgxpool.Pool
	registry  *jobs.Registry
	mux       *handlers.Mux // the built-ins' and the workflow engine's handlers, for startWorker
	jobs      *jobs.Client
	workflows *workflow.Engine
	server    *httptest.Server
	api       *Server
}

type setupOpts struct {
	cfg Config
}

func setup(t testing.TB, opts setupOpts) *testBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	registry := jobs.NewRegistry()
	mux := handlers.NewMux()
	if err := handlers.RegisterBuiltins(registry, mux, handlers.BuiltinConfig{}); err != nil {
		t.Fatal(err)
	}
	client, err := jobs.NewInsertOnlyClient(pool, registry)
	if err != nil {
		t.Fatal(err)
	}
	engine, err := workflow.New(workflow.Config{}, workflow.Deps{Pool: pool, Jobs: client})
	if err != nil {
		t.Fatal(err)
	}
	engine.RegisterHandlers(mux)
	broker := events.NewBroker(pool, events.Config{}, nil)
	if err := broker.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = broker.Stop(context.Background()) })
	cfg := opts.cfg
	cfg.Tokens = []Token{
		NewToken("reader", ScopeRead, readToken),
		NewToken("writer", ScopeWrite, writeToken),
		NewToken("admin", ScopeAdmin, adminToken),
	}
	srv, err := New(cfg, Deps{Jobs: client, Pool: pool, Workflows: engine, Events: broker, Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	srv.MarkStarted()
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return &testBundle{pool: pool, registry: registry, mux: mux, jobs: client, workflows: engine, server: ts, api: srv}
}

// do sends a request and returns the response and its body.
func (b *testBundle) do(t testing.TB, method, path, token, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, b.server.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, data
}

// taskCount counts every task in the database.
func (b *testBundle) taskCount(t testing.TB) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func decode[T any](t testing.TB, data []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	return v
}

type taskJSON struct {
	ID          int64           `json:"id"`
	Type        string          `json:"type"`
	Queue       string          `json:"queue"`
	State       string          `json:"state"`
	Args        json.RawMessage `json:"args"`
	Priority    int             `json:"priority"`
	MaxAttempts int             `json:"max_attempts"`
	Tags        []string        `json:"tags"`
	Timeout     string          `json:"timeout"`
}

// expectProblem checks a problem response.
func expectProblem(t *testing.T, res *http.Response, data []byte, status int, typ string, fields ...string) Problem {
	t.Helper()
	if res.StatusCode != status {
		t.Fatalf("status %d, want %d; body %s", res.StatusCode, status, data)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("content type %q, want application/problem+json", ct)
	}
	p := decode[Problem](t, data)
	if p.Type != problemBase+typ || p.Status != status || p.Title == "" {
		t.Errorf("problem %+v, want type %s", p, typ)
	}
	for i, f := range fields {
		if i >= len(p.Errors) || p.Errors[i].Field != f {
			t.Errorf("problem errors %+v, want field %q at %d", p.Errors, f, i)
		}
	}
	return p
}

func TestTaskLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})

	res, data := b.do(t, "POST", "/v1/tasks", writeToken, `{"type":"sleep","args":{"duration":"1h"},"queue":"slow","priority":2,"delay":"1h","max_attempts":3,"timeout":"2h","tags":["demo-tag"]}`)
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("create: %d %s", res.StatusCode, data)
	}
	created := decode[taskJSON](t, data)
	if created.Type != "sleep" || created.Queue != "slow" || created.State != "scheduled" || created.Priority != 2 ||
		created.MaxAttempts != 3 || created.Timeout != "2h0m0s" || len(created.Tags) != 1 {
		t.Errorf("created = %+v", created)
	}
	if loc := res.Header.Get("Location"); loc != "/v1/tasks/"+itoa(created.ID) {
		t.Errorf("Location = %q", loc)
	}

	res, data = b.do(t, "GET", "/v1/tasks/"+itoa(created.ID), readToken, "")
	if got := decode[taskJSON](t, data); res.StatusCode != 200 || got.ID != created.ID || string(got.Args) != `{"duration": "1h"}` && string(got.Args) != `{"duration":"1h"}` {
		t.Errorf("get: %d %s", res.StatusCode, data)
	}

	res, data = b.do(t, "POST", "/v1/tasks/"+itoa(created.ID)+"/cancel", writeToken, "")
	if got := decode[taskJSON](t, data); res.StatusCode != 200 || got.State != "cancelled" {
		t.Errorf("cancel: %d %s", res.StatusCode, data)
	}
	res, data = b.do(t, "POST", "/v1/tasks/"+itoa(created.ID)+"/retry", writeToken, "")
	if got := decode[taskJSON](t, data); res.StatusCode != 200 || got.State != "queued" {
		t.Errorf("retry: %d %s", res.StatusCode, data)
	}
	res, data = b.do(t, "GET", "/v1/tasks/999999", readToken, "")
	expectProblem(t, res, data, 404, "not-found")
}

func TestTaskBatchAndList(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	res, data := b.do(t, "POST", "/v1/tasks/batch", writeToken,
		`{"tasks":[{"type":"noop","tags":["aaa"]},{"type":"noop","queue":"other"},{"type":"sleep","args":{"duration":"1s"},"tags":["aaa"]}]}`)
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("batch: %d %s", res.StatusCode, data)
	}
	if got := decode[struct{ Tasks []taskJSON }](t, data); len(got.Tasks) != 3 {
		t.Fatalf("batch returned %d tasks", len(got.Tasks))
	}

	type page struct {
		Tasks      []taskJSON `json:"tasks"`
		NextCursor string     `json:"next_cursor"`
	}
	for query, want := range map[string]int{
		"":                           3,
		"?type=noop":                 2,
		"?queue=other":               1,
		"?tag=aaa":                   2,
		"?state=queued&type=sleep":   1,
		"?state=completed":           0,
		"?state=queued&state=failed": 3,
	} {
		res, data := b.do(t, "GET", "/v1/tasks"+query, readToken, "")
		if got := decode[page](t, data); res.StatusCode != 200 || len(got.Tasks) != want {
			t.Errorf("list %q: %d, %d tasks; want %d", query, res.StatusCode, len(got.Tasks), want)
		}
	}
	// Pagination walks every task once.
	seen := map[int64]bool{}
	cursor := ""
	for range 5 {
		_, data := b.do(t, "GET", "/v1/tasks?limit=2&cursor="+cursor, readToken, "")
		p := decode[page](t, data)
		for _, tk := range p.Tasks {
			seen[tk.ID] = true
		}
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != 3 {
		t.Errorf("pagination saw %d tasks, want 3", len(seen))
	}
}

func TestTaskTypesQueuesWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	res, data := b.do(t, "GET", "/v1/task-types", readToken, "")
	if res.StatusCode != 200 || !strings.Contains(string(data), `"http.request"`) {
		t.Errorf("task types: %d %s", res.StatusCode, data)
	}

	b.do(t, "POST", "/v1/tasks", writeToken, `{"type":"noop","queue":"mail"}`)
	res, data = b.do(t, "GET", "/v1/queues", readToken, "")
	queues := decode[struct{ Queues []jobs.Queue }](t, data).Queues
	if res.StatusCode != 200 || len(queues) != 1 || queues[0].Name != "mail" || queues[0].Depth[jobs.StateQueued] != 1 {
		t.Fatalf("queues: %d %s", res.StatusCode, data)
	}

	// No pod has served "mail" yet: pausing it creates it paused.
	res, data = b.do(t, "POST", "/v1/queues/mail/pause", adminToken, "")
	if res.StatusCode != 200 {
		t.Fatalf("pause: %d %s", res.StatusCode, data)
	}
	_, data = b.do(t, "GET", "/v1/queues", readToken, "")
	if q := decode[struct{ Queues []jobs.Queue }](t, data).Queues; !q[0].Paused {
		t.Errorf("queue not paused after pause: %s", data)
	}
	res, _ = b.do(t, "POST", "/v1/queues/mail/resume", adminToken, "")
	_, data = b.do(t, "GET", "/v1/queues", readToken, "")
	if q := decode[struct{ Queues []jobs.Queue }](t, data).Queues; res.StatusCode != 200 || q[0].Paused {
		t.Errorf("queue paused after resume: %s", data)
	}
	res, data = b.do(t, "POST", "/v1/queues/nosuch/resume", adminToken, "")
	expectProblem(t, res, data, 404, "not-found")
	res, data = b.do(t, "POST", "/v1/queues/Bad%20Name/pause", adminToken, "")
	expectProblem(t, res, data, 400, "invalid-parameter", "name")

	if _, err := b.pool.Exec(t.Context(), `INSERT INTO switchyard_pod (id, host, pid, version, queues, started_at) VALUES ('pod-1', 'h', 1, 'v', '[{"name":"default","executor_size":10,"busy":2}]', now())`); err != nil {
		t.Fatal(err)
	}
	res, data = b.do(t, "GET", "/v1/workers", readToken, "")
	if res.StatusCode != 200 || !strings.Contains(string(data), `"executor_size":10`) || !strings.Contains(string(data), `"id":"pod-1"`) {
		t.Errorf("workers: %d %s", res.StatusCode, data)
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, tc := range []struct {
		name, method, path, token string
		status                    int
	}{
		{"no token", "GET", "/v1/tasks", "", 401},
		{"bad token", "GET", "/v1/tasks", "not-a-real-token-at-all", 401},
		{"read cannot write", "POST", "/v1/tasks", readToken, 403},
		{"write cannot pause", "POST", "/v1/queues/default/pause", writeToken, 403},
		{"read reads", "GET", "/v1/tasks", readToken, 200},
		{"admin reads", "GET", "/v1/queues", adminToken, 200},
		{"health is open", "GET", "/healthz", "", 200},
		{"readiness is open", "GET", "/readyz", "", 200},
		{"openapi is open", "GET", "/openapi.yaml", "", 200},
		{"metrics open by default", "GET", "/metrics", "", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, data := b.do(t, tc.method, tc.path, tc.token, `{"type":"noop"}`)
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.status, data)
			}
			if tc.status == 401 {
				expectProblem(t, res, data, 401, "unauthorized")
				if res.Header.Get("WWW-Authenticate") == "" {
					t.Error("401 without WWW-Authenticate")
				}
			}
			if tc.status == 403 {
				expectProblem(t, res, data, 403, "forbidden")
			}
		})
	}
	if n := b.taskCount(t); n != 0 {
		t.Errorf("rejected requests wrote %d tasks", n)
	}
}

func TestMetricsAuth(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: Config{MetricsAuth: true}})
	if res, _ := b.do(t, "GET", "/metrics", "", ""); res.StatusCode != 401 {
		t.Errorf("metrics without token: %d, want 401", res.StatusCode)
	}
	if res, _ := b.do(t, "GET", "/metrics", readToken, ""); res.StatusCode != 200 {
		t.Errorf("metrics with read token: %d, want 200", res.StatusCode)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: Config{MaxBodyBytes: 1024}})
	for _, tc := range []struct {
		name, path, body string
		status           int
		typ              string
		field            string
	}{
		{"malformed json", "/v1/tasks", `{"type":`, 400, "malformed-json", ""},
		{"empty body", "/v1/tasks", ` `, 400, "malformed-json", ""},
		{"not an object", "/v1/tasks", `[1,2]`, 400, "malformed-json", ""},
		{"two values", "/v1/tasks", `{"type":"noop"} {}`, 400, "malformed-json", ""},
		{"unknown type", "/v1/tasks", `{"type":"nope"}`, 422, "unknown-task-type", "type"},
		{"missing type", "/v1/tasks", `{"args":{}}`, 422, "validation-failed", "type"},
		{"args field type", "/v1/tasks", `{"type":"sleep","args":{"duration":5}}`, 422, "validation-failed", "args.duration"},
		{"args unknown field", "/v1/tasks", `{"type":"noop","args":{"x":1}}`, 422, "validation-failed", "args.x"},
		{"unknown top field", "/v1/tasks", `{"type":"noop","colour":"red"}`, 422, "validation-failed", "colour"},
		{"priority type", "/v1/tasks", `{"type":"noop","priority":"high"}`, 422, "validation-failed", "priority"},
		{"priority range", "/v1/tasks", `{"type":"noop","priority":9}`, 422, "validation-failed", "priority"},
		{"bad delay", "/v1/tasks", `{"type":"noop","delay":"soon"}`, 422, "validation-failed", "delay"},
		{"bad run_at", "/v1/tasks", `{"type":"noop","run_at":"tomorrow"}`, 422, "validation-failed", "run_at"},
		{"bad tag", "/v1/tasks", `{"type":"noop","tags":["a b"]}`, 422, "validation-failed", "tags[0]"},
		{"too large", "/v1/tasks", `{"type":"noop","args":{"pad":"` + strings.Repeat("x", 2000) + `"}}`, 413, "body-too-large", ""},
		{"batch item", "/v1/tasks/batch", `{"tasks":[{"type":"noop"},{"type":"sleep","args":{"duration":"x"}}]}`, 422, "validation-failed", "tasks[1].args.duration"},
		{"batch unknown type", "/v1/tasks/batch", `{"tasks":[{"type":"noop"},{"type":"nope"}]}`, 422, "unknown-task-type", "tasks[1].type"},
		{"empty batch", "/v1/tasks/batch", `{"tasks":[]}`, 422, "validation-failed", "tasks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, data := b.do(t, "POST", tc.path, writeToken, tc.body)
			var fields []string
			if tc.field != "" {
				fields = append(fields, tc.field)
			}
			p := expectProblem(t, res, data, tc.status, tc.typ, fields...)
			if tc.typ == "unknown-task-type" && len(p.KnownTypes) != 3 {
				t.Errorf("known types %v, want the 3 built-ins", p.KnownTypes)
			}
		})
	}
	for _, q := range []string{"?cursor=garbage", "?limit=0", "?limit=x", "?state=done"} {
		res, data := b.do(t, "GET", "/v1/tasks"+q, readToken, "")
		expectProblem(t, res, data, 400, "invalid-parameter")
	}
	res, data := b.do(t, "GET", "/v1/tasks/abc", readToken, "")
	expectProblem(t, res, data, 400, "invalid-parameter", "id")
	if n := b.taskCount(t); n != 0 {
		t.Errorf("rejected requests wrote %d tasks", n)
	}
}

func TestIdempotencyKeyHeader(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	body := `{"type":"noop"}`
	res1, data1 := b.do(t, "POST", "/v1/tasks", writeToken, body, "Idempotency-Key", "k-1")
	res2, data2 := b.do(t, "POST", "/v1/tasks", writeToken, body, "Idempotency-Key", "k-1")
	if res1.StatusCode != 202 || res2.StatusCode != 202 || string(data1) != string(data2) {
		t.Fatalf("replay: %d %s / %d %s", res1.StatusCode, data1, res2.StatusCode, data2)
	}
	if res2.Header.Get("Idempotent-Replayed") != "true" || res1.Header.Get("Idempotent-Replayed") != "" {
		t.Error("Idempotent-Replayed header wrong")
	}
	if n := b.taskCount(t); n != 1 {
		t.Fatalf("%d tasks after a replay, want 1", n)
	}
	res, data := b.do(t, "POST", "/v1/tasks", writeToken, `{"type":"noop","queue":"other"}`, "Idempotency-Key", "k-1")
	expectProblem(t, res, data, 409, "idempotency-key-reused")
	// Keys are per token: another token's k-1 is a new request.
	if res, _ := b.do(t, "POST", "/v1/tasks", adminToken, body, "Idempotency-Key", "k-1"); res.StatusCode != 202 {
		t.Errorf("other token same key: %d", res.StatusCode)
	}
	// A rejected request is replayed as rejected, and writes nothing.
	bad := `{"type":"nope"}`
	r1, d1 := b.do(t, "POST", "/v1/tasks", writeToken, bad, "Idempotency-Key", "k-2")
	r2, d2 := b.do(t, "POST", "/v1/tasks", writeToken, bad, "Idempotency-Key", "k-2")
	if r1.StatusCode != 422 || r2.StatusCode != 422 || string(d1) != string(d2) {
		t.Errorf("rejected replay: %d / %d", r1.StatusCode, r2.StatusCode)
	}
	if n := b.taskCount(t); n != 2 {
		t.Errorf("%d tasks, want 2", n)
	}
}

func TestEventsStream(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: Config{SSEHeartbeat: time.Hour}})
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", b.server.URL+"/v1/events?type=noop", nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(res.Body)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), ":") { // the opening comment: subscribed
		t.Fatalf("no opening comment: %q", sc.Text())
	}

	_, data := b.do(t, "POST", "/v1/tasks", writeToken, `{"type":"noop"}`)
	task := decode[taskJSON](t, data)
	b.do(t, "POST", "/v1/tasks/"+itoa(task.ID)+"/cancel", writeToken, "")

	var states []string
	for sc.Scan() && len(states) < 2 {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			e := decode[events.Event](t, []byte(d))
			if e.TaskID == task.ID {
				states = append(states, string(e.State))
			}
		}
	}
	if strings.Join(states, ",") != "queued,cancelled" {
		t.Errorf("streamed states %v, want queued then cancelled", states)
	}
}

func TestOpsOnly(t *testing.T) {
	t.Parallel()
	srv, err := New(Config{OpsOnly: true}, Deps{Metrics: prometheus.NewRegistry(), Ready: func(context.Context) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	if res, err := http.Get(ts.URL + "/readyz"); err != nil || res.StatusCode != 503 {
		t.Fatalf("readyz before MarkStarted: %v %v, want 503", res.StatusCode, err)
	}
	srv.MarkStarted()
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200, "/v1/tasks": 404} {
		res, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("%s: %d, want %d", path, res.StatusCode, want)
		}
	}
	srv.BeginShutdown()
	res, err := http.Get(ts.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 503 {
		t.Errorf("readyz while shutting down: %d, want 503", res.StatusCode)
	}
}

func TestNewRequiresTokens(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{}, Deps{Metrics: prometheus.NewRegistry()}); err == nil || !strings.Contains(err.Error(), "SWITCHYARD_API_TOKENS") {
		t.Errorf("err = %v, want a hint about SWITCHYARD_API_TOKENS", err)
	}
}

func TestParseTokens(t *testing.T) {
	t.Parallel()
	toks, err := ParseTokens(strings.NewReader("# comment\nci:write:0123456789abcdef0\nops:admin:0123456789abcdef1, dash:read:0123:456789abcdef\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 3 || toks[0].Scope != ScopeWrite || toks[2].Name != "dash" {
		t.Fatalf("tokens = %+v", toks)
	}
	for _, bad := range []string{"x:read", "x:owner:0123456789abcdef", "x:read:short", "a b:read:0123456789abcdef", "x:read:0123456789abcdef,x:read:0123456789abcdef"} {
		if _, err := ParseTokens(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: want an error", bad)
		} else if strings.Contains(err.Error(), "0123456789abcdef") {
			t.Errorf("%q: error leaks the secret: %v", bad, err)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
