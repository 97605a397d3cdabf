package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/db"
	"github.com/switchyard/switchyard/dbtest"
	"github.com/switchyard/switchyard/handlers"
	"github.com/switchyard/switchyard/jobs"
)

const (
	// pollEvery and pollFor bound every wait in these tests.
	pollEvery = 20 * time.Millisecond
	pollFor   = 15 * time.Second
	// shutdownWithin is how long serve may take to return after its
	// context is cancelled.
	shutdownWithin = 30 * time.Second
)

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a running
// serve (its logger) and the reads of the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testRedisURL is the Redis the local services run.
func testRedisURL() string {
	if u := os.Getenv(dbtest.RedisURLEnv); u != "" {
		return u
	}
	return "redis://127.0.0.1:56379/0"
}

// freeAddr returns a 127.0.0.1 address with a port nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pick a free port: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatalf("close probe listener: %v", err)
	}
	return addr
}

// testEnv is the environment of a command run against databaseURL: its own
// Redis key space, its own HTTP port, JSON logs. Tests add or override keys.
func testEnv(t *testing.T, databaseURL string) map[string]string {
	t.Helper()
	return map[string]string{
		"SWITCHYARD_DATABASE_URL":     databaseURL,
		"SWITCHYARD_REDIS_URL":        testRedisURL(),
		"SWITCHYARD_GUARD_KEY_PREFIX": dbtest.KeyPrefix(t),
		"SWITCHYARD_HTTP_ADDR":        freeAddr(t),
		"SWITCHYARD_LOG_FORMAT":       "json",
		"SWITCHYARD_API_TOKENS":       "test:admin:" + testAPIToken,
	}
}

// testAPIToken is the admin token of servers started by tests.
const testAPIToken = "test-admin-token-0123456789"

// getenvOf looks variables up in env only, never in the process environment.
func getenvOf(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

// runCmd runs `switchyard args...` in-process and returns its output.
func runCmd(ctx context.Context, env map[string]string, args ...string) (stdout, stderr string, err error) {
	var out, errOut syncBuffer
	err = run(ctx, append([]string{"switchyard"}, args...), getenvOf(env), &out, &errOut)
	return out.String(), errOut.String(), err
}

// mustRun runs a command that must succeed and returns its stdout.
func mustRun(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stdout, stderr, err := runCmd(ctx, env, args...)
	if err != nil {
		t.Fatalf("switchyard %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout
}

// runErr runs a command that must fail and returns its error message.
func runErr(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	stdout, stderr, err := runCmd(ctx, env, args...)
	if err == nil {
		t.Fatalf("switchyard %s: succeeded, want an error\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), stdout, stderr)
	}
	return err.Error()
}

// waitFor polls cond every pollEvery until it returns true, failing the test
// after pollFor with what cond last reported.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(pollFor)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", pollFor, what, last)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("test ended waiting for %s", what)
		case <-time.After(pollEvery):
		}
	}
}

// httpGet fetches url and returns its status and body; a transport error is
// returned, not fatal, so callers can poll.
func httpGet(ctx context.Context, url string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// server is a `switchyard serve` running in a goroutine.
type server struct {
	base   string // http://host:port
	cancel context.CancelFunc
	done   chan error
	stderr *syncBuffer
}

// startServe runs serve with env and extra args, waits until /readyz
// answers 200 and registers a cleanup that stops it.
func startServe(t *testing.T, env map[string]string, extra ...string) *server {
	t.Helper()
	return startServeUntil(t, "/readyz", env, extra...)
}

// startServeUntil is startServe waiting for path (such as /healthz) to
// answer 200 instead of /readyz.
func startServeUntil(t *testing.T, path string, env map[string]string, extra ...string) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{
		base:   "http://" + env["SWITCHYARD_HTTP_ADDR"],
		cancel: cancel,
		done:   make(chan error, 1),
		stderr: &syncBuffer{},
	}
	var stdout syncBuffer
	go func() {
		s.done <- run(ctx, append([]string{"switchyard", "serve"}, extra...), getenvOf(env), &stdout, s.stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(shutdownWithin):
			t.Errorf("serve did not return within %s of cleanup", shutdownWithin)
		}
		if t.Failed() {
			t.Logf("serve stderr:\n%s", s.stderr.String())
		}
	})
	waitFor(t, "GET "+path+" to answer 200", func() (bool, string) {
		select {
		case err := <-s.done:
			s.done <- err // for the cleanup
			t.Fatalf("serve returned before it was ready: %v\nstderr:\n%s", err, s.stderr.String())
		default:
		}
		code, body, err := httpGet(t.Context(), s.base+path)
		if err != nil {
			return false, err.Error()
		}
		return code == http.StatusOK, body
	})
	return s
}

// stop cancels serve's context and returns what run returned, failing the
// test if that takes longer than shutdownWithin.
func (s *server) stop(t *testing.T) error {
	t.Helper()
	s.cancel()
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup
		return err
	case <-time.After(shutdownWithin):
		t.Fatalf("serve did not return within %s of cancellation\nstderr:\n%s", shutdownWithin, s.stderr.String())
		return nil
	}
}

// metricsBody fetches /metrics.
func (s *server) metricsBody(t *testing.T) string {
	t.Helper()
	code, body, err := httpGet(t.Context(), s.base+"/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /metrics: status %d, err %v\n%s", code, err, body)
	}
	return body
}

// waitMetric polls /metrics until it has a line starting with line.
func (s *server) waitMetric(t *testing.T, line string) string {
	t.Helper()
	var body string
	waitFor(t, "/metrics to contain "+line, func() (bool, string) {
		code, b, err := httpGet(t.Context(), s.base+"/metrics")
		if err != nil || code != http.StatusOK {
			return false, "GET /metrics failed"
		}
		body = b
		return hasLine(b, line), grepLines(b, strings.SplitN(line, "{", 2)[0])
	})
	return body
}

// hasLine reports whether text has a line equal to line, or beginning with
// line and a space (a series name and labels whose value is not checked).
func hasLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if l == line || strings.HasPrefix(l, line+" ") {
			return true
		}
	}
	return false
}

// grepLines returns the lines of text that start with prefix.
func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// newJobsClient is an insert-only client on databaseURL for inspecting tasks.
func newJobsClient(t *testing.T, databaseURL string) *jobs.Client {
	t.Helper()
	pool, err := db.NewPool(t.Context(), db.PoolConfig{URL: databaseURL, MaxConns: 4})
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	// Registered after the database's cleanup, so it runs before the drop.
	t.Cleanup(pool.Close)
	reg := jobs.NewRegistry()
	if err := handlers.RegisterBuiltins(reg, handlers.NewMux(), handlers.BuiltinConfig{}); err != nil {
		t.Fatalf("register builtins: %v", err)
	}
	client, err := jobs.NewInsertOnlyClient(pool, reg)
	if err != nil {
		t.Fatalf("NewInsertOnlyClient: %v", err)
	}
	return client
}

// execSQL runs one statement on databaseURL.
func execSQL(t *testing.T, databaseURL, sql string, args ...any) {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), databaseURL)
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	defer pool.Close()
	if _, err := pool.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// waitTaskState polls task id until it is in state want.
func waitTaskState(t *testing.T, client *jobs.Client, id int64, want jobs.State) *jobs.Task {
	t.Helper()
	var task *jobs.Task
	waitFor(t, "task to be "+string(want), func() (bool, string) {
		got, err := client.Get(t.Context(), id)
		if err != nil {
			return false, err.Error()
		}
		task = got
		return got.State == want, "state " + string(got.State)
	})
	return task
}

// assertNotListening fails if something accepts connections on addr.
func assertNotListening(t *testing.T, addr string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		conn.Close()
		t.Errorf("something listens on %s: serve started its HTTP server", addr)
	}
}
