package db_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/db"
	"github.com/switchyard/switchyard/dbtest"
)

type testBundle struct {
	pool *pgxpool.Pool
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	return &testBundle{pool: dbtest.NewPool(t)}
}

// insertJob writes a river_job row directly, in any state, and returns its
// id and attempted_at.
func (b *testBundle) insertJob(t *testing.T, queue, state string, attempt int, createdAgo, scheduledAgo time.Duration) (int64, time.Time) {
	t.Helper()
	var (
		id          int64
		attemptedAt time.Time
	)
	err := b.pool.QueryRow(context.Background(), `
		INSERT INTO river_job (args, kind, max_attempts, queue, state, attempt, attempted_at, created_at, scheduled_at, priority, finalized_at)
		VALUES ('{}', 'test', 5, $1, $2::text::river_job_state, $3::int,
		        CASE WHEN $3::int > 0 THEN date_trunc('milliseconds', now()) END,
		        now() - $4::interval, now() - $5::interval, 1,
		        CASE WHEN $2::text IN ('completed','discarded','cancelled') THEN now() END)
		RETURNING id, coalesce(attempted_at, 'epoch')`,
		queue, state, attempt, createdAgo.String(), scheduledAgo.String()).Scan(&id, &attemptedAt)
	if err != nil {
		t.Fatal(err)
	}
	return id, attemptedAt
}

func TestQueueStats(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.insertJob(t, "default", "available", 0, time.Hour, 10*time.Minute)
	b.insertJob(t, "default", "available", 0, time.Minute, time.Minute)
	b.insertJob(t, "default", "running", 1, time.Hour, time.Hour)
	b.insertJob(t, "email", "retryable", 1, 2*time.Hour, 0)
	b.insertJob(t, "email", "completed", 1, time.Hour, time.Hour) // final: not counted

	stats, err := db.QueueStats(t.Context(), b.pool)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]db.QueueStat{}
	for _, s := range stats {
		got[s.Queue+"/"+s.State] = s
	}
	if len(got) != 3 {
		t.Fatalf("stats = %+v, want 3 groups (final states excluded)", stats)
	}
	queued := got["default/queued"]
	if queued.Count != 2 || queued.OldestAge < 9*time.Minute || queued.OldestAge > 11*time.Minute {
		t.Errorf("default/queued = %+v, want 2 tasks, oldest runnable for ~10m (since scheduled_at)", queued)
	}
	if s := got["default/in_progress"]; s.Count != 1 || s.OldestAge > time.Minute {
		t.Errorf("default/in_progress = %+v, want 1 task running for seconds (since attempted_at)", s)
	}
	if s := got["email/retrying"]; s.Count != 1 || s.OldestAge < 119*time.Minute {
		t.Errorf("email/retrying = %+v, want 1 task created ~2h ago", s)
	}
}

func TestJobDiscardIfClaimedIsFenced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, attemptedAt := b.insertJob(t, "default", "running", 2, time.Minute, time.Minute)
	errJSON := []byte(`{"at":"2026-01-01T00:00:00Z","attempt":2,"error":"bad"}`)

	for name, claim := range map[string]db.Claim{
		"older attempt":           {ID: id, Attempt: 1, AttemptedAt: attemptedAt},
		"same attempt, resnoozed": {ID: id, Attempt: 2, AttemptedAt: attemptedAt.Add(-time.Second)},
	} {
		ok, err := db.JobDiscardIfClaimed(t.Context(), b.pool, claim, errJSON)
		if err != nil || ok {
			t.Errorf("%s: ok=%v err=%v; want a fence miss", name, ok, err)
		}
	}
	ok, err := db.JobDiscardIfClaimed(t.Context(), b.pool, db.Claim{ID: id, Attempt: 2, AttemptedAt: attemptedAt}, errJSON)
	if err != nil || !ok {
		t.Fatalf("current claim: ok=%v err=%v; want discarded", ok, err)
	}
	var (
		state  string
		errors int
	)
	if err := b.pool.QueryRow(t.Context(), `SELECT state::text, coalesce(array_length(errors, 1), 0) FROM river_job WHERE id = $1`, id).Scan(&state, &errors); err != nil {
		t.Fatal(err)
	}
	if state != "discarded" || errors != 1 {
		t.Errorf("state %s with %d errors; want discarded with 1", state, errors)
	}
	// A second, late write changes nothing.
	if ok, _ := db.JobDiscardIfClaimed(t.Context(), b.pool, db.Claim{ID: id, Attempt: 2, AttemptedAt: attemptedAt}, errJSON); ok {
		t.Error("discarding a discarded task must be a fence miss")
	}
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first, _ := b.insertJob(t, "default", "available", 0, 0, 0)
	second, _ := b.insertJob(t, "default", "available", 0, 0, 0)

	if _, err := db.IdempotencyKeyTaskID(t.Context(), b.pool, "k"); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("unknown key: err = %v, want ErrNotFound", err)
	}
	if owner, err := db.IdempotencyKeyInsert(t.Context(), b.pool, "k", first); err != nil || owner != first {
		t.Fatalf("first claim: owner %d err %v; want %d", owner, err, first)
	}
	if owner, err := db.IdempotencyKeyInsert(t.Context(), b.pool, "k", second); err != nil || owner != first {
		t.Fatalf("second claim: owner %d err %v; want the first task %d", owner, err, first)
	}
	if id, err := db.IdempotencyKeyTaskID(t.Context(), b.pool, "k"); err != nil || id != first {
		t.Fatalf("lookup: %d %v", id, err)
	}
	// The key dies with its task.
	if _, err := b.pool.Exec(t.Context(), `DELETE FROM river_job WHERE id = $1`, first); err != nil {
		t.Fatal(err)
	}
	if _, err := db.IdempotencyKeyTaskID(t.Context(), b.pool, "k"); !errors.Is(err, db.ErrNotFound) {
		t.Errorf("after delete: err = %v, want ErrNotFound", err)
	}
}

func TestNewPoolUnreachable(t *testing.T) {
	t.Parallel()
	_, err := db.NewPool(t.Context(), db.PoolConfig{URL: "postgres://postgres@127.0.0.1:1/x?sslmode=disable", ConnectTimeout: time.Second})
	if !errors.Is(err, db.ErrUnavailable) {
		t.Errorf("err = %v, want ErrUnavailable", err)
	}
}
