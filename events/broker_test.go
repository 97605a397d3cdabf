package events_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/switchyard/switchyard/dbtest"
	"github.com/switchyard/switchyard/events"
	"github.com/switchyard/switchyard/jobs"
)

// waitTimeout bounds every wait for something the broker should do soon.
const waitTimeout = 15 * time.Second

// startBroker starts a broker on pool, stopped at cleanup.
func startBroker(t *testing.T, pool *pgxpool.Pool, cfg events.Config) *events.Broker {
	t.Helper()
	b := events.NewBroker(pool, cfg, nil)
	if err := b.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := b.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	if !b.Ready() {
		t.Fatal("Ready() = false right after Start")
	}
	return b
}

// subscribe subscribes, unsubscribing at cleanup.
func subscribe(t *testing.T, b *events.Broker) <-chan events.Batch {
	t.Helper()
	ch, cancel := b.Subscribe()
	t.Cleanup(cancel)
	return ch
}

// next returns the next batch on ch, failing if none comes or ch is closed.
func next(t *testing.T, ch <-chan events.Batch) events.Batch {
	t.Helper()
	select {
	case b, ok := <-ch:
		if !ok {
			t.Fatal("subscription closed, want a batch")
		}
		return b
	case <-time.After(waitTimeout):
		t.Fatal("no batch within the timeout")
	}
	panic("unreachable")
}

// assertClosed fails unless ch is closed (after draining what it still had).
func assertClosed(t *testing.T, ch <-chan events.Batch) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("subscription not closed")
		}
	}
}

// assertEmpty fails if ch holds a batch now. Only meaningful after a later
// batch has been received (notifications arrive in commit order).
func assertEmpty(t *testing.T, ch <-chan events.Batch) {
	t.Helper()
	select {
	case b := <-ch:
		t.Fatalf("unexpected batch %+v", b)
	default:
	}
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// insertJob inserts one job with raw SQL and returns its ID.
func insertJob(t *testing.T, pool *pgxpool.Pool, kind string) int64 {
	t.Helper()
	var id int64
	err := pool.QueryRow(t.Context(),
		"INSERT INTO river_job (kind, max_attempts, args) VALUES ($1, 5, '{}') RETURNING id", kind).Scan(&id)
	if err != nil {
		t.Fatalf("insert job: %v", err)
	}
	return id
}

func assertEvent(t *testing.T, b events.Batch, id int64, state jobs.State, attempt int) events.Event {
	t.Helper()
	if len(b.Events) != 1 || b.Truncated != 0 || b.Resync {
		t.Fatalf("batch = %+v, want exactly one event", b)
	}
	e := b.Events[0]
	if e.TaskID != id || e.State != state || e.Attempt != attempt {
		t.Fatalf("event = %+v, want task %d %s attempt %d", e, id, state, attempt)
	}
	return e
}

type probeArgs struct {
	N int `json:"n"`
}

func (probeArgs) Kind() string { return "events_probe" }

func riverClient(t *testing.T, pool *pgxpool.Pool) *river.Client[pgx.Tx] {
	t.Helper()
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{SkipUnknownJobCheck: true})
	if err != nil {
		t.Fatalf("river.NewClient: %v", err)
	}
	return client
}

func TestStateChanges(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	b := startBroker(t, pool, events.Config{})
	ch := subscribe(t, b)

	before := time.Now()
	client := riverClient(t, pool)
	opts := &river.InsertOpts{Queue: "probes", UniqueOpts: river.UniqueOpts{ByArgs: true}}
	res, err := client.Insert(t.Context(), probeArgs{N: 1}, opts)
	if err != nil {
		t.Fatalf("Insert: %v", err)
	}
	id := res.Job.ID
	e := assertEvent(t, next(t, ch), id, jobs.StateQueued, 0)
	// A duplicate unique insert (River's INSERT ... ON CONFLICT DO UPDATE)
	// changes nothing: no event, as the next batch shows.
	if dup, err := client.Insert(t.Context(), probeArgs{N: 1}, opts); err != nil || !dup.UniqueSkippedAsDuplicate {
		t.Fatalf("duplicate Insert = %+v, %v; want skipped as duplicate", dup, err)
	}
	if e.Type != "events_probe" || e.Queue != "probes" {
		t.Errorf("event = %+v, want type events_probe in queue probes", e)
	}
	// The database's clock; allow for skew with the test process.
	if e.At.Before(before.Add(-time.Minute)) || e.At.After(time.Now().Add(time.Minute)) {
		t.Errorf("event At = %v, want about now (%v)", e.At, before)
	}

	exec(t, pool, "UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() WHERE id = $1", id)
	assertEvent(t, next(t, ch), id, jobs.StateInProgress, 1)

	// Not a state change: no event. Shown by the next batch being the next
	// state change, since notifications arrive in commit order.
	exec(t, pool, `UPDATE river_job SET metadata = '{"progress":1}' WHERE id = $1`, id)
	exec(t, pool, "UPDATE river_job SET state = 'completed', finalized_at = now() WHERE id = $1", id)
	assertEvent(t, next(t, ch), id, jobs.StateCompleted, 1)
	assertEmpty(t, ch)
}

func TestRolledBackChangeIsNotSent(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	b := startBroker(t, pool, events.Config{})
	ch := subscribe(t, b)

	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "INSERT INTO river_job (kind, max_attempts, args) VALUES ('rolled_back', 1, '{}')"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	id := insertJob(t, pool, "kept")
	assertEvent(t, next(t, ch), id, jobs.StateQueued, 0)
}

// TestOneBatchPerStatement: 200 rows changed by one statement arrive as one
// batch listing the first 50 and counting the rest.
func TestOneBatchPerStatement(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	b := startBroker(t, pool, events.Config{})
	ch := subscribe(t, b)

	exec(t, pool, "INSERT INTO river_job (kind, max_attempts, args) SELECT 'bulk', 1, '{}' FROM generate_series(1, 200)")
	inserted := next(t, ch)
	if len(inserted.Events) != 50 || inserted.Truncated != 150 {
		t.Fatalf("insert of 200: %d events, truncated %d; want 50 and 150", len(inserted.Events), inserted.Truncated)
	}

	exec(t, pool, "UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() WHERE kind = 'bulk'")
	batch := next(t, ch)
	if len(batch.Events) != 50 || batch.Truncated != 150 || batch.Resync {
		t.Fatalf("update of 200: %d events, truncated %d, resync %v; want 50, 150, false", len(batch.Events), batch.Truncated, batch.Resync)
	}
	if !batch.NeedsRefresh() {
		t.Error("NeedsRefresh() = false for a truncated batch")
	}
	for i, e := range batch.Events {
		if e.State != jobs.StateInProgress || e.Attempt != 1 || e.Type != "bulk" {
			t.Fatalf("event %d = %+v, want bulk in_progress attempt 1", i, e)
		}
		// Oldest task first.
		if want := inserted.Events[i].TaskID; e.TaskID != want {
			t.Fatalf("event %d is task %d, want %d", i, e.TaskID, want)
		}
	}
	assertEmpty(t, ch)
}

// TestPayloadStaysUnderLimit: with the longest kinds and queues River allows,
// in characters that take several bytes in JSON, fewer than 50 tasks fit in
// one notification; the rest are counted. (Over 8000 bytes, pg_notify would
// fail the statement.)
func TestPayloadStaysUnderLimit(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	b := startBroker(t, pool, events.Config{})
	ch := subscribe(t, b)

	kind, queue := strings.Repeat("é", 127), strings.Repeat(`"`, 127)
	exec(t, pool, "INSERT INTO river_job (kind, queue, max_attempts, args) SELECT $1, $2, 1, '{}' FROM generate_series(1, 60)", kind, queue)
	batch := next(t, ch)
	if len(batch.Events) == 0 || len(batch.Events) >= 50 || len(batch.Events)+batch.Truncated != 60 {
		t.Fatalf("%d events + %d truncated; want fewer than 50 listed and 60 in all", len(batch.Events), batch.Truncated)
	}
	if e := batch.Events[0]; e.Type != kind || e.Queue != queue {
		t.Errorf("kind/queue did not survive the round trip: %q, %q", e.Type, e.Queue)
	}
	t.Logf("%d of 60 long tasks fit in one notification", len(batch.Events))
}

// TestCopyInsert: River's InsertManyFast uses COPY, which fires the
// statement trigger once too.
func TestCopyInsert(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	b := startBroker(t, pool, events.Config{})
	ch := subscribe(t, b)

	params := make([]river.InsertManyParams, 30)
	for i := range params {
		params[i] = river.InsertManyParams{Args: probeArgs{N: i}}
	}
	n, err := riverClient(t, pool).InsertManyFast(t.Context(), params)
	if err != nil || n != 30 {
		t.Fatalf("InsertManyFast = %d, %v; want 30", n, err)
	}
	batch := next(t, ch)
	if len(batch.Events) != 30 || batch.Truncated != 0 {
		t.Fatalf("COPY of 30: %d events, truncated %d; want 30 and 0", len(batch.Events), batch.Truncated)
	}
}

func TestTwoSubscribers(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	b := startBroker(t, pool, events.Config{})
	first, second := subscribe(t, b), subscribe(t, b)

	id := insertJob(t, pool, "noop")
	assertEvent(t, next(t, first), id, jobs.StateQueued, 0)
	assertEvent(t, next(t, second), id, jobs.StateQueued, 0)
}

func TestUnsubscribe(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	b := startBroker(t, pool, events.Config{})
	gone, cancel := b.Subscribe()
	stays := subscribe(t, b)

	cancel()
	select {
	case _, ok := <-gone:
		if ok {
			t.Fatal("received a batch after cancel, want a closed channel")
		}
	default:
		t.Fatal("channel still open when cancel returned")
	}
	cancel() // twice is fine

	id := insertJob(t, pool, "noop")
	assertEvent(t, next(t, stays), id, jobs.StateQueued, 0)
}

// TestSlowSubscriber: a subscriber that never reads does not hold up
// another, and when it finally reads, every change, task or execution
// event, is either delivered or counted in a coalesced batch.
func TestSlowSubscriber(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	const buffer, changes = 4, 20
	b := startBroker(t, pool, events.Config{BufferSize: buffer})
	slow, fast := subscribe(t, b), subscribe(t, b)
	execID := insertExecution(t, pool)

	for i := range changes {
		if i%2 == 0 {
			id := insertJob(t, pool, fmt.Sprint("job", i))
			assertEvent(t, next(t, fast), id, jobs.StateQueued, 0)
		} else {
			e := appendEvent(t, pool, execID, fmt.Sprint("event", i), nil)
			assertExecution(t, next(t, fast), e)
		}
	}
	// The fast subscriber may get a batch before the broker has queued it
	// for the slow one. The broker handles notifications one at a time, so
	// once fast has one more, every earlier batch is queued for slow too.
	sentinel := insertJob(t, pool, "sentinel")
	assertEvent(t, next(t, fast), sentinel, jobs.StateQueued, 0)

	var batches, delivered, counted int
	coalesced := false
	for delivered+counted < changes {
		batch := next(t, slow)
		batches++
		t.Logf("slow got %d task events, %d execution events, truncated %d, resync %v",
			len(batch.Events), len(batch.Executions), batch.Truncated, batch.Resync)
		delivered += len(batch.Events) + len(batch.Executions)
		counted += batch.Truncated
		if len(batch.Events)+len(batch.Executions) == 0 && batch.Truncated > 0 {
			coalesced = true
		}
	}
	// The sentinel is either still to come or merged into the last batch.
	if total := delivered + counted; total != changes && total != changes+1 || !coalesced {
		t.Errorf("slow subscriber: %d delivered + %d counted, coalesced %v; want %d in all (%d with the sentinel), coalesced",
			delivered, counted, coalesced, changes, changes+1)
	}
	// The buffer, plus the one batch being handed over.
	if batches > buffer+1 {
		t.Errorf("slow subscriber got %d batches, want at most %d", batches, buffer+1)
	}
}

// listenerPID returns the backend PID of the broker's connection, waiting
// for there to be exactly one besides notPID (a backend being terminated
// lingers in pg_stat_activity for a moment; 0 excludes nothing).
func listenerPID(t *testing.T, pool *pgxpool.Pool, notPID int) int {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		rows, err := pool.Query(t.Context(), `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1 AND pid <> $2`, events.DefaultApplicationName, notPID)
		if err != nil {
			t.Fatalf("look up listener: %v", err)
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			t.Fatalf("look up listener: %v", err)
		}
		switch {
		case len(pids) == 1:
			return pids[0]
		case len(pids) > 1:
			t.Fatalf("listener connections %v, want one", pids)
		case time.Now().After(deadline):
			t.Fatal("no listener connection in pg_stat_activity")
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestReconnect kills the broker's backend, as a Postgres restart or an
// operator would: subscribers are told to resync, and later changes still
// arrive.
func TestReconnect(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	b := startBroker(t, pool, events.Config{ReconnectBackoffMin: 10 * time.Millisecond, ReconnectBackoffMax: 100 * time.Millisecond})
	ch := subscribe(t, b)

	pid := listenerPID(t, pool, 0)
	var killed bool
	if err := pool.QueryRow(t.Context(), "SELECT pg_terminate_backend($1)", pid).Scan(&killed); err != nil || !killed {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, killed, err)
	}

	resync := next(t, ch)
	if !resync.Resync || len(resync.Events) != 0 || !resync.NeedsRefresh() {
		t.Fatalf("first batch after the connection was killed = %+v, want a resync", resync)
	}
	if !b.Ready() {
		t.Error("Ready() = false after the resync was sent")
	}
	listenerPID(t, pool, pid) // a new connection, and only one

	id := insertJob(t, pool, "after_reconnect")
	assertEvent(t, next(t, ch), id, jobs.StateQueued, 0)
	// The new connection listens on both channels.
	e := appendEvent(t, pool, insertExecution(t, pool), "after_reconnect", nil)
	assertExecution(t, next(t, ch), e)
}

// TestQuietConnectionIsPinged: a connection quiet for PingInterval is pinged
// and keeps working (a timed-out wait must not break it).
func TestQuietConnectionIsPinged(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	b := startBroker(t, pool, events.Config{PingInterval: 20 * time.Millisecond})
	ch := subscribe(t, b)
	pid := listenerPID(t, pool, 0)

	// pg_stat_activity shows the backend's last statement: pgx's ping
	// replaces the LISTEN.
	deadline := time.Now().Add(waitTimeout)
	for pinged := false; !pinged; {
		if time.Now().After(deadline) {
			t.Fatal("listener never pinged")
		}
		err := pool.QueryRow(t.Context(),
			"SELECT coalesce((SELECT query = '-- ping' FROM pg_stat_activity WHERE pid = $1), false)", pid).Scan(&pinged)
		if err != nil {
			t.Fatal(err)
		}
		if !pinged {
			select {
			case <-t.Context().Done():
				t.Fatal(t.Context().Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}

	id := insertJob(t, pool, "after_ping")
	assertEvent(t, next(t, ch), id, jobs.StateQueued, 0)
	if got := listenerPID(t, pool, 0); got != pid {
		t.Errorf("listener moved from backend %d to %d: a ping should not reconnect", pid, got)
	}
}

func TestStopClosesSubscriptions(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	b := events.NewBroker(pool, events.Config{}, nil)
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ch, _ := b.Subscribe()

	if err := b.Stop(t.Context()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertClosed(t, ch)
	if b.Ready() {
		t.Error("Ready() = true after Stop")
	}
	if err := b.Stop(t.Context()); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	late, cancel := b.Subscribe()
	assertClosed(t, late)
	cancel()
	if err := b.Start(t.Context()); err == nil {
		t.Error("Start after Stop succeeded")
	}

	// The connection is closed, not returned to the pool.
	deadline := time.Now().Add(waitTimeout)
	for {
		var n int
		err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1`, events.DefaultApplicationName).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d listener connections left after Stop", n)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestStartContextEndsBroker: the broker lives as long as Start's context.
func TestStartContextEndsBroker(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	b := events.NewBroker(pool, events.Config{}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ch, _ := b.Subscribe()
	cancel()
	assertClosed(t, ch)
	if err := b.Stop(t.Context()); err != nil {
		t.Errorf("Stop after the context ended: %v", err)
	}
}

// TestSubscribeBeforeStart: a subscriber from before the broker listened is
// told it may have missed changes, then gets the ones after Start.
func TestSubscribeBeforeStart(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	b := events.NewBroker(pool, events.Config{}, nil)
	ch, cancel := b.Subscribe()
	defer cancel()
	if b.Ready() {
		t.Error("Ready() = true before Start")
	}
	insertJob(t, pool, "before_start")
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Stop(context.Background()) }()

	if first := next(t, ch); !first.Resync || len(first.Events) != 0 {
		t.Fatalf("first batch = %+v, want a resync", first)
	}
	id := insertJob(t, pool, "after_start")
	assertEvent(t, next(t, ch), id, jobs.StateQueued, 0)
}

func TestStartFailsWithoutDatabase(t *testing.T) {
	t.Parallel()
	// Port 1 refuses connections; pgxpool only dials on first use.
	pool, err := pgxpool.New(t.Context(), "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	b := events.NewBroker(pool, events.Config{}, nil)
	err = b.Start(t.Context())
	if err == nil {
		_ = b.Stop(t.Context())
		t.Fatal("Start succeeded without a database")
	}
	if !strings.Contains(err.Error(), "start event broker") || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Start error = %v; want a connection error naming the operation", err)
	}
	if b.Ready() {
		t.Error("Ready() = true after a failed Start")
	}
}

// syncBuffer is a log destination the broker's goroutine and the test can
// share.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
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

// waitFor polls cond until it holds, failing with what after waitTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestOutage is a database that refuses connections for a while, as during
// a Postgres restart: the broker retries with backoff, is not ready
// meanwhile, keeps its subscribers, and resumes when connections are
// allowed again. (The shared test server cannot be restarted; refusing
// connections to this test's database is the same from the broker's side.)
func TestOutage(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	dbName := strings.TrimPrefix(u.Path, "/")
	u.Path = "/postgres"
	admin, err := pgx.Connect(t.Context(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close(context.Background()) }()
	// Opened now: it must outlive the outage.
	ctl, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ctl.Close(context.Background()) }()

	poolCfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	poolCfg.ConnConfig.RuntimeParams["application_name"] = "events-test-pool"
	pool, err := pgxpool.NewWithConfig(t.Context(), poolCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b := events.NewBroker(pool, events.Config{ReconnectBackoffMin: 10 * time.Millisecond, ReconnectBackoffMax: 50 * time.Millisecond}, logger)
	if err := b.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Stop(context.Background()) }()
	ch := subscribe(t, b)

	allow := func(on bool) {
		t.Helper()
		if _, err := admin.Exec(t.Context(), fmt.Sprintf("ALTER DATABASE %s WITH ALLOW_CONNECTIONS %v", pgx.Identifier{dbName}.Sanitize(), on)); err != nil {
			t.Fatalf("allow connections %v: %v", on, err)
		}
	}
	allow(false)
	defer allow(true) // before dbtest drops the database, in case of failure
	// The broker's connection and the pool's idle ones, so it cannot hijack
	// a survivor.
	if _, err := ctl.Exec(t.Context(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name IN ($1, 'events-test-pool')`, events.DefaultApplicationName); err != nil {
		t.Fatal(err)
	}

	waitFor(t, "two failed reconnects", func() bool {
		return strings.Count(logs.String(), "could not reconnect") >= 2
	})
	if b.Ready() {
		t.Error("Ready() = true while the database refuses connections")
	}
	if !strings.Contains(logs.String(), "level=WARN msg=\"event broker lost its Postgres connection") {
		t.Errorf("connection loss not logged at warn:\n%s", logs)
	}
	select {
	case batch, ok := <-ch:
		t.Fatalf("subscriber got %+v (open %v) during the outage, want nothing yet", batch, ok)
	default:
	}

	allow(true)
	if batch := next(t, ch); !batch.Resync {
		t.Fatalf("first batch after the outage = %+v, want a resync", batch)
	}
	waitFor(t, "Ready", b.Ready)
	var id int64
	if err := ctl.QueryRow(t.Context(), "INSERT INTO river_job (kind, max_attempts, args) VALUES ('after_outage', 1, '{}') RETURNING id").Scan(&id); err != nil {
		t.Fatal(err)
	}
	assertEvent(t, next(t, ch), id, jobs.StateQueued, 0)
}

// TestUnreadableNotification: a payload the broker cannot decode (only a
// trigger from another schema version could send one) means lost changes,
// so subscribers are told to resync.
func TestUnreadableNotification(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	b := startBroker(t, pool, events.Config{})
	ch := subscribe(t, b)

	for _, n := range []struct{ channel, payload string }{
		{events.Channel, `not json`},
		{events.Channel, `{"tasks":[]}`},
		{events.Channel, `{"tasks":[],"truncated":-1}`},
		{events.ExecutionChannel, `not json`},
		{events.ExecutionChannel, `{"executions":[]}`},
		{events.ExecutionChannel, `{"tasks":[{"id":1,"type":"noop","queue":"default","state":"available","attempt":0}]}`},
	} {
		exec(t, pool, "SELECT pg_notify($1, $2)", n.channel, n.payload)
		if batch := next(t, ch); !batch.Resync || len(batch.Events) != 0 || len(batch.Executions) != 0 {
			t.Errorf("payload %s on %s: batch %+v, want a resync", n.payload, n.channel, batch)
		}
	}
	id := insertJob(t, pool, "after_garbage")
	assertEvent(t, next(t, ch), id, jobs.StateQueued, 0)
	if !b.Ready() {
		t.Error("Ready() = false: a bad payload should not cost the connection")
	}
}
