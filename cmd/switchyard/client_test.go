package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard/switchyard/api"
	"github.com/switchyard/switchyard/dbtest"
	"github.com/switchyard/switchyard/events"
	"github.com/switchyard/switchyard/handlers"
	"github.com/switchyard/switchyard/jobs"
	"github.com/switchyard/switchyard/workflow"
)

// Token secrets of the client tests.
const (
	cliReadToken  = "cli-reader-secret-0123456789"
	cliWriteToken = "cli-writer-secret-0123456789"
	cliAdminToken = "cli-admin-secret-01234567890"
)

// apiFixture is an API server running in-process on its own database.
type apiFixture struct {
	url  string
	pool *pgxpool.Pool
}

func startAPI(t *testing.T) *apiFixture {
	t.Helper()
	pool := dbtest.NewPool(t)
	registry := jobs.NewRegistry()
	if err := handlers.RegisterBuiltins(registry, handlers.NewMux(), handlers.BuiltinConfig{}); err != nil {
		t.Fatal(err)
	}
	client, err := jobs.NewInsertOnlyClient(pool, registry)
	if err != nil {
		t.Fatal(err)
	}
	workflows, err := workflow.New(workflow.Config{}, workflow.Deps{Pool: pool, Jobs: client})
	if err != nil {
		t.Fatal(err)
	}
	broker := events.NewBroker(pool, events.Config{}, nil)
	if err := broker.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = broker.Stop(context.Background()) })
	apiServer, err := api.New(api.Config{Tokens: []api.Token{
		api.NewToken("reader", api.ScopeRead, cliReadToken),
		api.NewToken("writer", api.ScopeWrite, cliWriteToken),
		api.NewToken("admin", api.ScopeAdmin, cliAdminToken),
	}}, api.Deps{Jobs: client, Pool: pool, Workflows: workflows, Events: broker, Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(apiServer)
	t.Cleanup(ts.Close)
	return &apiFixture{url: ts.URL, pool: pool}
}

// env is the environment of a client command using token.
func (f *apiFixture) env(token string) map[string]string {
	return map[string]string{"SWITCHYARD_URL": f.url, "SWITCHYARD_TOKEN": token}
}

func (f *apiFixture) exec(t *testing.T, sql string) {
	t.Helper()
	if _, err := f.pool.Exec(t.Context(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// enqueueID enqueues with the CLI and returns the new task's id.
func enqueueID(t *testing.T, env map[string]string, args ...string) int64 {
	t.Helper()
	out := mustRun(t, env, append([]string{"task", "enqueue"}, args...)...)
	var id int64
	if _, err := fmt.Sscanf(out, "enqueued task %d:", &id); err != nil {
		t.Fatalf("task enqueue %v printed %q: %v", args, out, err)
	}
	return id
}

// decodeJSON parses the output of a --json command.
func decodeJSON[T any](t *testing.T, out string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("output is not the expected JSON: %v\n%s", err, out)
	}
	return v
}

// mustContain fails unless s contains every want.
func mustContain(t *testing.T, what, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("%s does not contain %q:\n%s", what, w, s)
		}
	}
}

// tableRow returns the line of a table whose first column is first.
func tableRow(table, first string) string {
	for _, l := range strings.Split(table, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == first {
			return l
		}
	}
	return ""
}

func TestClientTaskLifecycle(t *testing.T) {
	t.Parallel()
	f := startAPI(t)
	env := f.env(cliWriteToken)

	out := mustRun(t, env, "task", "enqueue", "sleep", "--args", `{"duration":"1h"}`, "--delay", "1h", "--tag", "cli-tag")
	mustContain(t, "enqueue output", out, "enqueued task ", "type=sleep", "queue=default", "state=scheduled")
	var id int64
	if _, err := fmt.Sscanf(out, "enqueued task %d:", &id); err != nil {
		t.Fatalf("enqueue printed %q: %v", out, err)
	}
	sid := fmt.Sprint(id)

	// get, flags after the id, table and JSON.
	out = mustRun(t, env, "task", "get", sid)
	mustContain(t, "task get", out, "id:", sid, "sleep", "scheduled", "cli-tag", `{"duration":"1h"}`)
	got := decodeJSON[taskView](t, mustRun(t, env, "task", "get", sid, "--json"))
	if got.ID != id || got.Type != "sleep" || got.State != "scheduled" || len(got.Tags) != 1 {
		t.Errorf("task get --json = %+v", got)
	}

	// list: a table with a header and the task's row.
	out = mustRun(t, env, "task", "list")
	mustContain(t, "task list", out, "ID", "TYPE", "QUEUE", "STATE", "ATTEMPT", "CREATED")
	if row := tableRow(out, sid); !strings.Contains(row, "sleep") || !strings.Contains(row, "scheduled") {
		t.Errorf("task list has no row for task %s of type sleep, scheduled:\n%s", sid, out)
	}

	// cancel, then retry.
	out = mustRun(t, env, "task", "cancel", sid)
	if want := "task " + sid + ": cancelled\n"; out != want {
		t.Errorf("task cancel printed %q, want %q", out, want)
	}
	out = mustRun(t, env, "task", "retry", sid)
	if want := "task " + sid + ": queued\n"; out != want {
		t.Errorf("task retry printed %q, want %q", out, want)
	}
	// Cancel with --json prints the task.
	if got := decodeJSON[taskView](t, mustRun(t, env, "task", "cancel", "--json", sid)); got.State != "cancelled" {
		t.Errorf("task cancel --json state = %q, want cancelled", got.State)
	}

	// A missing task is the API's 404.
	msg := runErr(t, env, "task", "get", "999999")
	mustContain(t, "get of a missing task", msg, "404 not-found")
	msg = runErr(t, env, "task", "get", "abc")
	mustContain(t, "get of a bad id", msg, `"abc"`)
}

func TestClientTaskEnqueueJSONAndOptions(t *testing.T) {
	t.Parallel()
	f := startAPI(t)
	env := f.env(cliWriteToken)
	// Per-call flags are never read from the environment.
	env["SWITCHYARD_QUEUE"] = "from-env"
	env["SWITCHYARD_ARGS"] = `{"bogus":1}`
	env["SWITCHYARD_PRIORITY"] = "9"
	env["SWITCHYARD_JSON"] = "true"

	out := mustRun(t, env, "task", "enqueue", "--queue", "email", "sleep", "--args", `{"duration":"10ms"}`,
		"--priority", "3", "--max-attempts", "7", "--timeout", "2h", "--run-at", "2099-01-02T15:04:05Z",
		"--tag", "one-tag", "--tag", "two-tag", "--idempotency-key", "body-key", "--json")
	if !strings.Contains(out, "\n  \"id\": ") {
		t.Errorf("--json output is not pretty-printed:\n%s", out)
	}
	task := decodeJSON[taskView](t, out)
	if task.Type != "sleep" || task.Queue != "email" || task.Priority != 3 || task.MaxAttempts != 7 || task.Timeout != "2h0m0s" ||
		task.State != "scheduled" || task.ScheduledAt.Year() != 2099 || strings.Join(task.Tags, ",") != "one-tag,two-tag" ||
		task.IdempotencyKey != "body-key" {
		t.Errorf("enqueued task = %+v", task)
	}

	// Without flags, the type's defaults, whatever the environment says.
	out = mustRun(t, env, "task", "enqueue", "noop")
	mustContain(t, "enqueue noop", out, "enqueued task", "queue=default", "state=queued")

	// The body's idempotency key finds the existing task.
	out = mustRun(t, env, "task", "enqueue", "sleep", "--args", `{"duration":"10ms"}`, "--idempotency-key", "body-key")
	mustContain(t, "enqueue with a used idempotency key", out, "already enqueued (idempotency key)", fmt.Sprintf("task %d:", task.ID))

	// The request key (Idempotency-Key header) replays the first response.
	first := enqueueID(t, env, "noop", "--request-key", "req-1")
	out = mustRun(t, env, "task", "enqueue", "noop", "--request-key", "req-1")
	mustContain(t, "enqueue with a used request key", out, "already enqueued (request key replayed)", fmt.Sprintf("task %d:", first))
	msg := runErr(t, env, "task", "enqueue", "noop", "--queue", "other", "--request-key", "req-1")
	mustContain(t, "request key reused for another request", msg, "409 idempotency-key-reused")

	// Local checks.
	mustContain(t, "bad --args", runErr(t, env, "task", "enqueue", "noop", "--args", "not json"), "--args", "JSON")
	mustContain(t, "bad --run-at", runErr(t, env, "task", "enqueue", "noop", "--run-at", "tomorrow"), "--run-at", "RFC 3339")
	mustContain(t, "no type", runErr(t, env, "task", "enqueue", "--args", "{}"), "missing TYPE")
	mustContain(t, "two types", runErr(t, env, "task", "enqueue", "noop", "sleep"), "unexpected arguments")
}

func TestClientTaskEnqueueErrors(t *testing.T) {
	t.Parallel()
	f := startAPI(t)
	env := f.env(cliWriteToken)

	msg := runErr(t, env, "task", "enqueue", "frobnicate")
	mustContain(t, "unknown type error", msg, "422 unknown-task-type", "type: is not a registered task type", "known types: http.request, noop, sleep")

	msg = runErr(t, env, "task", "enqueue", "sleep", "--args", `{"duration":5}`)
	mustContain(t, "bad args error", msg, "422 validation-failed", "args.duration")

	msg = runErr(t, env, "task", "enqueue", "noop", "--priority", "9")
	mustContain(t, "bad priority error", msg, "422 validation-failed", "priority")

	// A read token cannot enqueue.
	msg = runErr(t, f.env(cliReadToken), "task", "enqueue", "noop")
	mustContain(t, "enqueue with a read token", msg, "403 forbidden", "write")

	var n int
	if err := f.pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("refused enqueues left %d tasks", n)
	}
}

func TestClientTaskList(t *testing.T) {
	t.Parallel()
	f := startAPI(t)
	env := f.env(cliWriteToken)
	queued := []int64{enqueueID(t, env, "noop"), enqueueID(t, env, "noop", "--queue", "other", "--tag", "tagged")}
	scheduled := enqueueID(t, env, "sleep", "--args", `{"duration":"1s"}`, "--delay", "1h")
	cancelled := enqueueID(t, env, "noop")
	mustRun(t, env, "task", "cancel", fmt.Sprint(cancelled))

	rows := func(table string) []string {
		var ids []string
		for _, l := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
			ids = append(ids, strings.Fields(l)[0])
		}
		return ids
	}
	ids := func(ns ...int64) []string {
		var s []string
		for _, n := range ns {
			s = append(s, fmt.Sprint(n))
		}
		return s
	}
	check := func(what string, got, want []string) {
		t.Helper()
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: rows %v, want %v", what, got, want)
		}
	}

	check("all", rows(mustRun(t, env, "task", "list")), ids(queued[0], queued[1], scheduled, cancelled))
	check("--state queued", rows(mustRun(t, env, "task", "list", "--state", "queued")), ids(queued...))
	check("--state scheduled --state cancelled", rows(mustRun(t, env, "task", "list", "--state", "scheduled", "--state", "cancelled")), ids(scheduled, cancelled))
	check("--state scheduled,cancelled", rows(mustRun(t, env, "task", "list", "--state", "scheduled,cancelled")), ids(scheduled, cancelled))
	check("--type sleep", rows(mustRun(t, env, "task", "list", "--type", "sleep")), ids(scheduled))
	check("--queue other", rows(mustRun(t, env, "task", "list", "--queue", "other")), ids(queued[1]))
	check("--tag tagged", rows(mustRun(t, env, "task", "list", "--tag", "tagged")), ids(queued[1]))

	// Pages: one page says how to go on; --all follows the cursor.
	stdout, stderr, err := runCmd(t.Context(), env, "task", "list", "--limit", "1")
	if err != nil {
		t.Fatalf("task list --limit 1: %v", err)
	}
	check("--limit 1", rows(stdout), ids(queued[0]))
	mustContain(t, "stderr of a partial list", stderr, "--cursor ", "--all")
	check("--limit 1 --all", rows(mustRun(t, env, "task", "list", "--limit", "1", "--all")), ids(queued[0], queued[1], scheduled, cancelled))

	page := decodeJSON[taskPage](t, mustRun(t, env, "task", "list", "--limit", "2", "--json"))
	if len(page.Tasks) != 2 || page.NextCursor == "" {
		t.Fatalf("task list --limit 2 --json: %d tasks, next_cursor %q", len(page.Tasks), page.NextCursor)
	}
	rest := decodeJSON[taskPage](t, mustRun(t, env, "task", "list", "--limit", "2", "--cursor", page.NextCursor, "--json"))
	if len(rest.Tasks) != 2 {
		t.Errorf("second page has %d tasks, want 2", len(rest.Tasks))
	}
	all := decodeJSON[taskPage](t, mustRun(t, env, "task", "list", "--limit", "1", "--all", "--json"))
	if len(all.Tasks) != 4 || all.NextCursor != "" {
		t.Errorf("task list --all --json: %d tasks, next_cursor %q; want 4 and none", len(all.Tasks), all.NextCursor)
	}

	mustContain(t, "bad state", runErr(t, env, "task", "list", "--state", "done"), "400 invalid-parameter", "state")
}

func TestClientQueues(t *testing.T) {
	t.Parallel()
	f := startAPI(t)
	env := f.env(cliAdminToken)
	enqueueID(t, env, "noop", "--queue", "mail")
	enqueueID(t, env, "noop", "--queue", "mail")
	enqueueID(t, env, "noop", "--queue", "mail", "--delay", "1h")

	out := mustRun(t, env, "queue", "list")
	mustContain(t, "queue list", out, "NAME", "PAUSED", "QUEUED", "SCHEDULED", "IN_PROGRESS", "RETRYING", "WAITING", "OLDEST_QUEUED")
	row := strings.Fields(tableRow(out, "mail"))
	if len(row) != 8 || row[1] != "no" || row[2] != "2" || row[3] != "1" || row[4] != "0" || row[7] == "-" {
		t.Errorf("queue list row of mail = %q, want not paused, 2 queued, 1 scheduled, an oldest age:\n%s", row, out)
	}

	// River knows a queue once a worker served it; record one as a pod would.
	f.exec(t, `INSERT INTO river_queue (name, created_at, metadata, updated_at) VALUES ('mail', now(), '{}', now())`)

	// Pausing needs an admin token.
	for _, tok := range []string{cliWriteToken, cliReadToken} {
		stdout, stderr, err := runCmd(t.Context(), f.env(tok), "queue", "pause", "mail")
		if err == nil {
			t.Fatalf("queue pause with a non-admin token succeeded: %s", stdout)
		}
		mustContain(t, "queue pause with a non-admin token", err.Error(), "403 forbidden", "admin")
		if strings.Contains(err.Error()+stdout+stderr, tok) {
			t.Errorf("the output shows the token:\n%v\n%s%s", err, stdout, stderr)
		}
	}

	if out := mustRun(t, env, "queue", "pause", "mail"); out != "queue mail paused\n" {
		t.Errorf("queue pause printed %q", out)
	}
	if row := strings.Fields(tableRow(mustRun(t, env, "queue", "list"), "mail")); len(row) < 2 || row[1] != "yes" {
		t.Errorf("after pause, queue list row of mail = %q, want paused", row)
	}
	res := decodeJSON[struct {
		Queues []queueView `json:"queues"`
	}](t, mustRun(t, env, "queue", "list", "--json"))
	if len(res.Queues) != 1 || !res.Queues[0].Paused || res.Queues[0].Depth["queued"] != 2 {
		t.Errorf("queue list --json = %+v", res.Queues)
	}
	if out := mustRun(t, env, "queue", "resume", "mail"); out != "queue mail resumed\n" {
		t.Errorf("queue resume printed %q", out)
	}
	if row := strings.Fields(tableRow(mustRun(t, env, "queue", "list"), "mail")); len(row) < 2 || row[1] != "no" {
		t.Errorf("after resume, queue list row of mail = %q, want not paused", row)
	}

	mustContain(t, "resume of an unknown queue", runErr(t, env, "queue", "resume", "nosuch"), "404 not-found")
	mustContain(t, "pause without a name", runErr(t, env, "queue", "pause"), "missing NAME")
	mustContain(t, "unknown subcommand", runErr(t, env, "queue", "drain"), `unknown subcommand "drain"`)
}

func TestClientWorkers(t *testing.T) {
	t.Parallel()
	f := startAPI(t)
	env := f.env(cliReadToken)

	_, stderr, err := runCmd(t.Context(), env, "workers")
	if err != nil {
		t.Fatalf("workers: %v", err)
	}
	mustContain(t, "workers stderr without pods", stderr, "no live workers")

	f.exec(t, `INSERT INTO switchyard_pod (id, host, pid, version, queues, started_at) VALUES
		('pod-1', 'host-a', 1, 'v1', '[{"name":"default","executor_size":10,"busy":2},{"name":"email","executor_size":5,"busy":0}]', now())`)
	out := mustRun(t, env, "workers")
	mustContain(t, "workers", out, "ID", "HOST", "QUEUES", "HEARTBEAT")
	row := tableRow(out, "pod-1")
	mustContain(t, "workers row of pod-1", row, "host-a", "default 2/10, email 0/5", " ago")

	res := decodeJSON[struct {
		Workers []workerView `json:"workers"`
	}](t, mustRun(t, env, "workers", "--json"))
	if len(res.Workers) != 1 || res.Workers[0].ID != "pod-1" || len(res.Workers[0].Queues) != 2 || res.Workers[0].Queues[0].ExecutorSize != 10 {
		t.Errorf("workers --json = %+v", res.Workers)
	}
}

func TestClientAuthErrors(t *testing.T) {
	t.Parallel()
	f := startAPI(t)
	const badToken = "not-the-right-secret-987654"

	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{"no token", map[string]string{"SWITCHYARD_URL": f.url}, []string{"task", "list"},
			[]string{"401 unauthorized", "--token", "SWITCHYARD_TOKEN"}},
		{"bad token from the environment", f.env(badToken), []string{"task", "list"},
			[]string{"401 unauthorized", "--token", "SWITCHYARD_TOKEN"}},
		{"bad token flag", f.env(cliReadToken), []string{"workers", "--token", badToken},
			[]string{"401 unauthorized", "--token", "SWITCHYARD_TOKEN"}},
		{"bad token on enqueue", f.env(badToken), []string{"task", "enqueue", "noop"},
			[]string{"401 unauthorized", "--token", "SWITCHYARD_TOKEN"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, err := runCmd(t.Context(), c.env, c.args...)
			if err == nil {
				t.Fatalf("succeeded, want an error: %s", stdout)
			}
			mustContain(t, "error", err.Error(), c.want...)
			if all := err.Error() + stdout + stderr; strings.Contains(all, badToken) || strings.Contains(all, cliReadToken) {
				t.Errorf("the output shows the token:\n%v\n%s%s", err, stdout, stderr)
			}
		})
	}

	// The --server flag beats the environment.
	env := map[string]string{"SWITCHYARD_URL": "http://" + freeAddr(t), "SWITCHYARD_TOKEN": cliReadToken}
	if out := mustRun(t, env, "task", "list", "--server", f.url+"/"); !strings.HasPrefix(out, "ID") {
		t.Errorf("task list --server printed %q", out)
	}
}

func TestClientUnreachableServer(t *testing.T) {
	t.Parallel()
	server := "http://" + freeAddr(t)
	env := map[string]string{"SWITCHYARD_URL": server, "SWITCHYARD_TOKEN": cliReadToken}
	for _, args := range [][]string{{"task", "list"}, {"queue", "list"}, {"workers"}, {"task", "enqueue", "noop"}} {
		stdout, stderr, err := runCmd(t.Context(), env, args...)
		if err == nil {
			t.Fatalf("%v succeeded against %s", args, server)
		}
		mustContain(t, fmt.Sprintf("error of %v", args), err.Error(), server, "--server", "SWITCHYARD_URL")
		if strings.Contains(err.Error()+stdout+stderr, cliReadToken) {
			t.Errorf("the output shows the token: %v", err)
		}
	}
	// Settings checked before any request.
	mustContain(t, "bad --server", runErr(t, env, "workers", "--server", "ftp://x"), "--server", "SWITCHYARD_URL")
	mustContain(t, "bad --timeout", runErr(t, env, "workers", "--timeout", "0s"), "--timeout")
	mustContain(t, "bad SWITCHYARD_TIMEOUT", runErr(t, map[string]string{"SWITCHYARD_TIMEOUT": "soon"}, "workers"), "SWITCHYARD_TIMEOUT")
}

func TestClientUsage(t *testing.T) {
	t.Parallel()
	env := map[string]string{}
	mustContain(t, "task help", mustRun(t, env, "task", "help"), "task enqueue TYPE", "task list")
	mustContain(t, "queue help", mustRun(t, env, "queue", "-h"), "queue pause")
	mustContain(t, "task without subcommand", runErr(t, env, "task"), "missing subcommand")
	mustContain(t, "unknown task subcommand", runErr(t, env, "task", "frob"), `unknown subcommand "frob"`)
	mustContain(t, "get without id", runErr(t, env, "task", "get"), "missing ID")
	mustContain(t, "unknown flag", runErr(t, env, "task", "list", "--frob"), "frob")
	if _, stderr, err := runCmd(t.Context(), env, "task", "enqueue", "-h"); err != nil || !strings.Contains(stderr, "--request-key") && !strings.Contains(stderr, "-request-key") {
		t.Errorf("task enqueue -h: err %v, stderr:\n%s", err, stderr)
	}
}
