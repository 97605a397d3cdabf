package jobs_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/dbtest"
	"github.com/switchyard/switchyard/jobs"
)

// countConfig is test.count's configuration in setup.
var countConfig = jobs.TypeConfig{Queue: "counting", Priority: 2, Retry: jobs.RetryPolicy{MaxAttempts: 7}}

type testBundle struct {
	client *jobs.Client
	pool   *pgxpool.Pool
	reg    *jobs.Registry
}

// setup returns an insert-only client on a fresh database, knowing
// test.count (countConfig), test.other (zero config) and test.email.
func setup(t *testing.T) *testBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	reg := jobs.NewRegistry()
	jobs.MustRegister[countArgs](reg, countConfig)
	jobs.MustRegister[otherArgs](reg, jobs.TypeConfig{})
	jobs.MustRegister[emailArgs](reg, jobs.TypeConfig{})
	client, err := jobs.NewInsertOnlyClient(pool, reg)
	if err != nil {
		t.Fatalf("NewInsertOnlyClient: %v", err)
	}
	if client.Registry() != reg {
		t.Fatal("Client.Registry() is not the registry it was built with")
	}
	return &testBundle{client: client, pool: pool, reg: reg}
}

// enqueue enqueues and fails the test on error.
func (b *testBundle) enqueue(t *testing.T, args jobs.Args, opts *jobs.EnqueueOptions) *jobs.EnqueueResult {
	t.Helper()
	res, err := b.client.Enqueue(t.Context(), args, opts)
	if err != nil {
		t.Fatalf("Enqueue(%s): %v", args.TaskType(), err)
	}
	return res
}

// listAll returns every task in the database, by id.
func (b *testBundle) listAll(t *testing.T) []*jobs.Task {
	t.Helper()
	res, err := b.client.List(t.Context(), jobs.ListParams{Limit: 1000})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return res.Tasks
}

// requireNoTasks asserts that nothing was written.
func (b *testBundle) requireNoTasks(t *testing.T) {
	t.Helper()
	if tasks := b.listAll(t); len(tasks) != 0 {
		t.Fatalf("%d tasks in the database (first: %+v); want none", len(tasks), tasks[0])
	}
	if n := b.countKeys(t); n != 0 {
		t.Fatalf("%d idempotency keys in the database; want none", n)
	}
}

// countKeys counts the rows of switchyard_idempotency_key.
func (b *testBundle) countKeys(t *testing.T) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(t.Context(), "SELECT count(*) FROM switchyard_idempotency_key").Scan(&n); err != nil {
		t.Fatalf("count idempotency keys: %v", err)
	}
	return n
}

// requireJSONEqual compares JSON documents by value (jsonb reorders keys).
func requireJSONEqual(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("decode %q: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("decode want %q: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("JSON = %s; want %s", got, want)
	}
}

// requireSameTask compares the fields an enqueue sets.
func requireSameTask(t *testing.T, got, want *jobs.Task) {
	t.Helper()
	if got.ID != want.ID || got.Type != want.Type || got.Queue != want.Queue || got.State != want.State ||
		got.Priority != want.Priority || got.MaxAttempts != want.MaxAttempts || got.Attempt != want.Attempt ||
		got.Timeout != want.Timeout || got.IdempotencyKey != want.IdempotencyKey ||
		!slices.Equal(got.Tags, want.Tags) || !got.CreatedAt.Equal(want.CreatedAt) || !got.ScheduledAt.Equal(want.ScheduledAt) {
		t.Fatalf("task differs:\n got  %+v\n want %+v", got, want)
	}
	requireJSONEqual(t, got.Args, string(want.Args))
}

func ids(tasks []*jobs.Task) []int64 {
	out := make([]int64, len(tasks))
	for i, task := range tasks {
		out[i] = task.ID
	}
	return out
}

func TestClientEnqueue(t *testing.T) {
	t.Parallel()

	t.Run("TypedArgs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		args := countArgs{Count: 3, Name: "x"}
		args.Inner.Level = 2
		before := time.Now()
		res := b.enqueue(t, args, nil)
		task := res.Task

		if res.Duplicate {
			t.Error("Duplicate = true for a new task")
		}
		if task.ID == 0 {
			t.Error("ID = 0")
		}
		if task.Type != "test.count" || task.Queue != "counting" || task.State != jobs.StateQueued ||
			task.Priority != 2 || task.MaxAttempts != 7 || task.Attempt != 0 {
			t.Errorf("task = %+v; want type test.count, queue counting, queued, priority 2, max_attempts 7, attempt 0", task)
		}
		requireJSONEqual(t, task.Args, `{"count":3,"name":"x","inner":{"level":2}}`)
		if task.Tags == nil || len(task.Tags) != 0 {
			t.Errorf("Tags = %#v; want an empty, non-nil slice", task.Tags)
		}
		if len(task.Errors) != 0 || task.AttemptedAt != nil || task.FinalizedAt != nil {
			t.Errorf("new task has errors %v, attempted_at %v, finalized_at %v", task.Errors, task.AttemptedAt, task.FinalizedAt)
		}
		if task.ScheduledAt.Before(before.Add(-time.Second)) || task.ScheduledAt.After(time.Now().Add(time.Second)) {
			t.Errorf("ScheduledAt = %s; want about now", task.ScheduledAt)
		}

		got, err := b.client.Get(t.Context(), task.ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		requireSameTask(t, got, task)

		// The stored args decode back into the Go type.
		var back countArgs
		if err := json.Unmarshal(got.Args, &back); err != nil || back.Count != 3 || back.Name != "x" || back.Inner.Level != 2 {
			t.Errorf("stored args decode to %+v (err %v); want %+v", back, err, args)
		}
	})

	t.Run("RawArgs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.enqueue(t, jobs.RawArgs{Type: "test.count", JSON: json.RawMessage(`{"count": 9, "name": "raw"}`)}, nil).Task
		if task.Type != "test.count" || task.Queue != "counting" || task.State != jobs.StateQueued ||
			task.Priority != 2 || task.MaxAttempts != 7 {
			t.Errorf("task = %+v; want type test.count, queue counting, queued, priority 2, max_attempts 7", task)
		}
		// Raw arguments are stored as given: no fields filled in.
		requireJSONEqual(t, task.Args, `{"count":9,"name":"raw"}`)
		got, err := b.client.Get(t.Context(), task.ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		requireSameTask(t, got, task)
	})

	t.Run("RawArgsEmptyJSONIsEmptyObject", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.enqueue(t, jobs.RawArgs{Type: "test.other"}, nil).Task
		requireJSONEqual(t, task.Args, `{}`)
	})

	t.Run("ZeroTypeConfigDefaults", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.enqueue(t, otherArgs{Note: "n"}, nil).Task
		if task.Queue != jobs.DefaultQueue || task.Priority != jobs.DefaultPriority || task.MaxAttempts != jobs.DefaultMaxAttempts {
			t.Errorf("task = %+v; want queue %q, priority %d, max_attempts %d", task, jobs.DefaultQueue, jobs.DefaultPriority, jobs.DefaultMaxAttempts)
		}
	})

	t.Run("NilArgs", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.client.Enqueue(t.Context(), nil, nil)
		requireValidationError(t, err, "type")
		b.requireNoTasks(t)
	})
}

func TestClientEnqueueOptions(t *testing.T) {
	t.Parallel()

	runAt := time.Now().Add(3 * time.Hour).Truncate(time.Microsecond)
	pastRunAt := time.Now().Add(-time.Hour).Truncate(time.Microsecond)

	tests := []struct {
		name  string
		opts  jobs.EnqueueOptions
		check func(t *testing.T, task *jobs.Task)
	}{
		{"Queue", jobs.EnqueueOptions{Queue: "custom-q_1"}, func(t *testing.T, task *jobs.Task) {
			if task.Queue != "custom-q_1" {
				t.Errorf("Queue = %q; want custom-q_1", task.Queue)
			}
		}},
		{"Priority", jobs.EnqueueOptions{Priority: 4}, func(t *testing.T, task *jobs.Task) {
			if task.Priority != 4 {
				t.Errorf("Priority = %d; want 4", task.Priority)
			}
		}},
		{"MaxAttempts", jobs.EnqueueOptions{MaxAttempts: 3}, func(t *testing.T, task *jobs.Task) {
			if task.MaxAttempts != 3 {
				t.Errorf("MaxAttempts = %d; want 3", task.MaxAttempts)
			}
		}},
		{"MaxAttemptsUpperBound", jobs.EnqueueOptions{MaxAttempts: 1000}, func(t *testing.T, task *jobs.Task) {
			if task.MaxAttempts != 1000 {
				t.Errorf("MaxAttempts = %d; want 1000", task.MaxAttempts)
			}
		}},
		{"Timeout", jobs.EnqueueOptions{Timeout: 30 * time.Second}, func(t *testing.T, task *jobs.Task) {
			if task.Timeout != 30*time.Second {
				t.Errorf("Timeout = %s; want 30s", task.Timeout)
			}
		}},
		{"TimeoutUpperBound", jobs.EnqueueOptions{Timeout: 24 * time.Hour}, func(t *testing.T, task *jobs.Task) {
			if task.Timeout != 24*time.Hour {
				t.Errorf("Timeout = %s; want 24h", task.Timeout)
			}
		}},
		{"Tags", jobs.EnqueueOptions{Tags: []string{"alpha", "beta-2", "x_y", strings.Repeat("t", 255)}}, func(t *testing.T, task *jobs.Task) {
			if want := []string{"alpha", "beta-2", "x_y", strings.Repeat("t", 255)}; !slices.Equal(task.Tags, want) {
				t.Errorf("Tags = %v; want %v", task.Tags, want)
			}
		}},
		{"IdempotencyKeyMaxLength", jobs.EnqueueOptions{IdempotencyKey: strings.Repeat("k", 255)}, func(t *testing.T, task *jobs.Task) {
			if task.IdempotencyKey != strings.Repeat("k", 255) {
				t.Errorf("IdempotencyKey = %q; want 255 k's", task.IdempotencyKey)
			}
		}},
		{"RunAtFuture", jobs.EnqueueOptions{RunAt: runAt}, func(t *testing.T, task *jobs.Task) {
			if task.State != jobs.StateScheduled {
				t.Errorf("State = %s; want scheduled", task.State)
			}
			if !task.ScheduledAt.Equal(runAt) {
				t.Errorf("ScheduledAt = %s; want %s", task.ScheduledAt, runAt)
			}
		}},
		{"RunAtPast", jobs.EnqueueOptions{RunAt: pastRunAt}, func(t *testing.T, task *jobs.Task) {
			// River stores any explicit scheduled_at as "scheduled"; its
			// scheduler makes the task available at its next pass. Either
			// state is acceptable, but never a final one.
			if task.State != jobs.StateQueued && task.State != jobs.StateScheduled {
				t.Errorf("State = %s; want queued or scheduled for a run_at in the past", task.State)
			}
			if !task.ScheduledAt.Equal(pastRunAt) {
				t.Errorf("ScheduledAt = %s; want %s", task.ScheduledAt, pastRunAt)
			}
		}},
		{"AllTogether", jobs.EnqueueOptions{Queue: "q2", Priority: 3, MaxAttempts: 2, Timeout: time.Minute, Tags: []string{"one", "two"}, IdempotencyKey: "all"}, func(t *testing.T, task *jobs.Task) {
			if task.Queue != "q2" || task.Priority != 3 || task.MaxAttempts != 2 || task.Timeout != time.Minute ||
				!slices.Equal(task.Tags, []string{"one", "two"}) || task.IdempotencyKey != "all" {
				t.Errorf("task = %+v; want every option applied", task)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			opts := tt.opts
			task := b.enqueue(t, countArgs{Count: 1}, &opts).Task
			tt.check(t, task)
			got, err := b.client.Get(t.Context(), task.ID)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			requireSameTask(t, got, task)
			tt.check(t, got)
		})
	}

	t.Run("Delay", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const delay = 90 * time.Minute
		before := time.Now()
		task := b.enqueue(t, countArgs{Count: 1}, &jobs.EnqueueOptions{Delay: delay}).Task
		after := time.Now()
		if task.State != jobs.StateScheduled {
			t.Errorf("State = %s; want scheduled", task.State)
		}
		// Postgres keeps microseconds.
		lo, hi := before.Add(delay).Add(-time.Millisecond), after.Add(delay).Add(time.Millisecond)
		if task.ScheduledAt.Before(lo) || task.ScheduledAt.After(hi) {
			t.Errorf("ScheduledAt = %s; want now+%s, in [%s, %s]", task.ScheduledAt, delay, lo, hi)
		}
		got, err := b.client.Get(t.Context(), task.ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		requireSameTask(t, got, task)
	})
}

func TestClientEnqueueInvalidOptions(t *testing.T) {
	t.Parallel()

	tooManyTags := make([]string, 33)
	for i := range tooManyTags {
		tooManyTags[i] = fmt.Sprintf("tag%02d", i)
	}

	tests := []struct {
		name  string
		opts  jobs.EnqueueOptions
		field string
	}{
		{"QueueUpperCase", jobs.EnqueueOptions{Queue: "Bad"}, "queue"},
		{"QueueSpace", jobs.EnqueueOptions{Queue: "a queue"}, "queue"},
		{"QueueDot", jobs.EnqueueOptions{Queue: "a.b"}, "queue"},
		{"PriorityTooHigh", jobs.EnqueueOptions{Priority: 5}, "priority"},
		{"PriorityNegative", jobs.EnqueueOptions{Priority: -1}, "priority"},
		{"MaxAttemptsNegative", jobs.EnqueueOptions{MaxAttempts: -1}, "max_attempts"},
		{"MaxAttemptsTooHigh", jobs.EnqueueOptions{MaxAttempts: 1001}, "max_attempts"},
		{"DelayNegative", jobs.EnqueueOptions{Delay: -time.Second}, "delay"},
		{"RunAtAndDelay", jobs.EnqueueOptions{Delay: time.Minute, RunAt: time.Now().Add(time.Hour)}, "run_at"},
		{"TimeoutNegative", jobs.EnqueueOptions{Timeout: -time.Second}, "timeout"},
		{"TimeoutTooLong", jobs.EnqueueOptions{Timeout: 24*time.Hour + time.Second}, "timeout"},
		{"TagTooShort", jobs.EnqueueOptions{Tags: []string{"ok-tag", "x"}}, "tags[1]"},
		{"TagSpace", jobs.EnqueueOptions{Tags: []string{"has space"}}, "tags[0]"},
		{"TagLeadingDash", jobs.EnqueueOptions{Tags: []string{"good", "fine", "-lead"}}, "tags[2]"},
		{"TagTrailingDash", jobs.EnqueueOptions{Tags: []string{"trail-"}}, "tags[0]"},
		{"TagEmpty", jobs.EnqueueOptions{Tags: []string{""}}, "tags[0]"},
		{"TagTooLong", jobs.EnqueueOptions{Tags: []string{strings.Repeat("t", 256)}}, "tags[0]"},
		{"TooManyTags", jobs.EnqueueOptions{Tags: tooManyTags}, "tags"},
		{"IdempotencyKeyTooLong", jobs.EnqueueOptions{IdempotencyKey: strings.Repeat("k", 256)}, "idempotency_key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			opts := tt.opts
			res, err := b.client.Enqueue(t.Context(), countArgs{Count: 1}, &opts)
			if res != nil {
				t.Errorf("Enqueue returned %+v with its error; want nil", res)
			}
			requireValidationError(t, err, tt.field)
			// Raw arguments go through the same checks.
			_, err = b.client.Enqueue(t.Context(), jobs.RawArgs{Type: "test.count", JSON: json.RawMessage(`{"count":1}`)}, &opts)
			requireValidationError(t, err, tt.field)
			b.requireNoTasks(t)
		})
	}
}

func TestClientEnqueueUnknownType(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		args jobs.Args
	}{
		{"Raw", jobs.RawArgs{Type: "test.nope", JSON: json.RawMessage(`{}`)}},
		{"Typed", punctNameArgs{}}, // a valid name, but not registered in setup
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			_, err := b.client.Enqueue(t.Context(), tt.args, nil)
			if !errors.Is(err, jobs.ErrUnknownType) {
				t.Fatalf("err = %v; want ErrUnknownType", err)
			}
			if !strings.Contains(err.Error(), tt.args.TaskType()) || !strings.Contains(err.Error(), "test.count") {
				t.Errorf("error %q should name the unknown type and list the known ones", err)
			}
			b.requireNoTasks(t)
		})
	}
}

func TestClientEnqueueBadRawArgs(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name  string
		args  jobs.RawArgs
		field string
	}{
		{"WrongFieldType", jobs.RawArgs{Type: "test.count", JSON: json.RawMessage(`{"count":"x"}`)}, "args.count"},
		{"WrongNestedFieldType", jobs.RawArgs{Type: "test.count", JSON: json.RawMessage(`{"inner":{"level":[]}}`)}, "args.inner.level"},
		{"UnknownField", jobs.RawArgs{Type: "test.count", JSON: json.RawMessage(`{"cuont":1}`)}, "args.cuont"},
		{"Malformed", jobs.RawArgs{Type: "test.count", JSON: json.RawMessage(`{"count":1`)}, "args"},
		{"NotAnObject", jobs.RawArgs{Type: "test.count", JSON: json.RawMessage(`[1]`)}, "args"},
		{"TrailingData", jobs.RawArgs{Type: "test.count", JSON: json.RawMessage(`{"count":1} {}`)}, "args"},
		// Not caught by Decoder.More: must still be a validation error,
		// not a failure of River's insert.
		{"TrailingCloseBrace", jobs.RawArgs{Type: "test.count", JSON: json.RawMessage(`{"count":1}}`)}, "args"},
		{"ValidatorRejects", jobs.RawArgs{Type: "test.email", JSON: json.RawMessage(`{"email":""}`)}, "args.email"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			_, err := b.client.Enqueue(t.Context(), tt.args, nil)
			requireValidationError(t, err, tt.field)
			b.requireNoTasks(t)
		})
	}

	t.Run("TypedValidatorRejects", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.client.Enqueue(t.Context(), emailArgs{}, nil)
		var ve *jobs.ValidationError
		if !errors.As(err, &ve) || ve != errEmailRequired {
			t.Fatalf("err = %v; want the Validator's own *ValidationError", err)
		}
		b.requireNoTasks(t)
	})
}

func TestClientEnqueueTx(t *testing.T) {
	t.Parallel()

	t.Run("RolledBack", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		tx, err := b.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

		res, err := b.client.EnqueueTx(ctx, tx, countArgs{Count: 1}, &jobs.EnqueueOptions{IdempotencyKey: "tx-key"})
		if err != nil {
			t.Fatalf("EnqueueTx: %v", err)
		}
		id := res.Task.ID
		if res.Task.State != jobs.StateQueued || res.Duplicate {
			t.Errorf("result = %+v; want a new queued task", res)
		}
		// Not visible outside the transaction before it ends.
		if _, err := b.client.Get(ctx, id); !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("Get before commit: err = %v; want ErrNotFound", err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatalf("Rollback: %v", err)
		}
		if _, err := b.client.Get(ctx, id); !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("Get after rollback: err = %v; want ErrNotFound", err)
		}
		b.requireNoTasks(t)

		// The key went with the transaction: it is free again.
		again := b.enqueue(t, countArgs{Count: 2}, &jobs.EnqueueOptions{IdempotencyKey: "tx-key"})
		if again.Duplicate {
			t.Errorf("enqueue after rollback: Duplicate = true; want a new task")
		}
	})

	t.Run("Committed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		tx, err := b.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

		res, err := b.client.EnqueueTx(ctx, tx, countArgs{Count: 1}, nil)
		if err != nil {
			t.Fatalf("EnqueueTx: %v", err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		got, err := b.client.Get(ctx, res.Task.ID)
		if err != nil {
			t.Fatalf("Get after commit: %v", err)
		}
		requireSameTask(t, got, res.Task)
		if tasks := b.listAll(t); len(tasks) != 1 {
			t.Errorf("%d tasks after commit; want 1", len(tasks))
		}
	})

	t.Run("ValidationErrorWritesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		tx, err := b.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		_, err = b.client.EnqueueTx(ctx, tx, countArgs{Count: 1}, &jobs.EnqueueOptions{Priority: 9})
		requireValidationError(t, err, "priority")
		// The caller's transaction is still usable and holds nothing.
		var n int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM river_job").Scan(&n); err != nil {
			t.Fatalf("query in the caller's transaction: %v", err)
		}
		if n != 0 {
			t.Errorf("%d jobs inside the transaction; want 0", n)
		}
	})
}

func TestClientEnqueueMany(t *testing.T) {
	t.Parallel()

	valid := func(n int) jobs.EnqueueParams { return jobs.EnqueueParams{Args: countArgs{Count: n}} }

	t.Run("AllInserted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res, err := b.client.EnqueueMany(t.Context(), []jobs.EnqueueParams{
			valid(1),
			{Args: otherArgs{Note: "b"}, Options: &jobs.EnqueueOptions{Queue: "elsewhere"}},
			{Args: jobs.RawArgs{Type: "test.count", JSON: json.RawMessage(`{"count":3}`)}},
		})
		if err != nil {
			t.Fatalf("EnqueueMany: %v", err)
		}
		if len(res) != 3 {
			t.Fatalf("%d results; want 3", len(res))
		}
		if res[0].Task.Type != "test.count" || res[1].Task.Type != "test.other" || res[1].Task.Queue != "elsewhere" || res[2].Task.Type != "test.count" {
			t.Errorf("results out of order or wrong: %+v %+v %+v", res[0].Task, res[1].Task, res[2].Task)
		}
		requireJSONEqual(t, res[2].Task.Args, `{"count":3}`)
		listed := b.listAll(t)
		if want := []int64{res[0].Task.ID, res[1].Task.ID, res[2].Task.ID}; !slices.Equal(ids(listed), want) {
			t.Errorf("listed ids %v; want %v", ids(listed), want)
		}
	})

	invalid := []struct {
		name  string
		bad   jobs.EnqueueParams
		field string
	}{
		{"BadOption", jobs.EnqueueParams{Args: countArgs{Count: 2}, Options: &jobs.EnqueueOptions{Priority: 9}}, "tasks[1].priority"},
		{"BadTag", jobs.EnqueueParams{Args: countArgs{Count: 2}, Options: &jobs.EnqueueOptions{Tags: []string{"fine", "x"}}}, "tasks[1].tags[1]"},
		{"BadRawArgs", jobs.EnqueueParams{Args: jobs.RawArgs{Type: "test.count", JSON: json.RawMessage(`{"count":"two"}`)}}, "tasks[1].args.count"},
		{"NilArgs", jobs.EnqueueParams{}, "tasks[1].type"},
	}
	for _, tt := range invalid {
		t.Run("AllOrNothing_"+tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			res, err := b.client.EnqueueMany(t.Context(), []jobs.EnqueueParams{
				{Args: countArgs{Count: 1}, Options: &jobs.EnqueueOptions{IdempotencyKey: "first"}},
				tt.bad,
				valid(3),
			})
			if res != nil {
				t.Errorf("EnqueueMany returned %v with its error; want nil", res)
			}
			requireValidationError(t, err, tt.field)
			b.requireNoTasks(t)
		})
	}

	t.Run("AllOrNothing_UnknownType", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.client.EnqueueMany(t.Context(), []jobs.EnqueueParams{
			valid(1),
			{Args: jobs.RawArgs{Type: "test.nope"}},
		})
		if !errors.Is(err, jobs.ErrUnknownType) {
			t.Fatalf("err = %v; want ErrUnknownType", err)
		}
		if !strings.Contains(err.Error(), "tasks[1]") {
			t.Errorf("error %q does not name the item tasks[1]", err)
		}
		b.requireNoTasks(t)
	})

	t.Run("SingleItemFieldNotPrefixed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.client.EnqueueMany(t.Context(), []jobs.EnqueueParams{{Args: countArgs{}, Options: &jobs.EnqueueOptions{Priority: 9}}})
		requireValidationError(t, err, "priority")
		b.requireNoTasks(t)
	})

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.client.EnqueueMany(t.Context(), nil)
		requireValidationError(t, err, "tasks")
		b.requireNoTasks(t)
	})
}

func TestClientIdempotencyKey(t *testing.T) {
	t.Parallel()

	t.Run("SameKeyReturnsExisting", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := b.enqueue(t, countArgs{Count: 1}, &jobs.EnqueueOptions{IdempotencyKey: "order-1"})
		if first.Duplicate {
			t.Error("first enqueue: Duplicate = true")
		}
		// Different arguments and options do not matter: the key decides.
		second := b.enqueue(t, countArgs{Count: 2}, &jobs.EnqueueOptions{IdempotencyKey: "order-1", Priority: 4})
		if !second.Duplicate {
			t.Error("second enqueue: Duplicate = false; want true")
		}
		if second.Task.ID != first.Task.ID {
			t.Errorf("second enqueue returned task %d; want the first's %d", second.Task.ID, first.Task.ID)
		}
		requireJSONEqual(t, second.Task.Args, `{"count":1,"inner":{"level":0}}`)
		if second.Task.Priority != 2 || second.Task.IdempotencyKey != "order-1" {
			t.Errorf("duplicate result = %+v; want the first task as stored", second.Task)
		}
		if tasks := b.listAll(t); len(tasks) != 1 {
			t.Errorf("%d tasks; want 1", len(tasks))
		}
		if n := b.countKeys(t); n != 1 {
			t.Errorf("%d keys; want 1", n)
		}
	})

	t.Run("DifferentKeyNewTask", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.enqueue(t, countArgs{Count: 1}, &jobs.EnqueueOptions{IdempotencyKey: "a"})
		c := b.enqueue(t, countArgs{Count: 1}, &jobs.EnqueueOptions{IdempotencyKey: "b"})
		if c.Duplicate || c.Task.ID == a.Task.ID {
			t.Errorf("second key: Duplicate = %v, id %d (first %d); want a new task", c.Duplicate, c.Task.ID, a.Task.ID)
		}
		if tasks := b.listAll(t); len(tasks) != 2 {
			t.Errorf("%d tasks; want 2", len(tasks))
		}
	})

	t.Run("NoKeyNoDeduplication", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.enqueue(t, countArgs{Count: 1}, nil)
		if res := b.enqueue(t, countArgs{Count: 1}, nil); res.Duplicate {
			t.Error("Duplicate = true without a key")
		}
		if tasks := b.listAll(t); len(tasks) != 2 {
			t.Errorf("%d tasks; want 2", len(tasks))
		}
		if n := b.countKeys(t); n != 0 {
			t.Errorf("%d keys; want 0", n)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const n = 10
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			results = make([]*jobs.EnqueueResult, n)
			errs    = make([]error, n)
		)
		for i := range n {
			wg.Go(func() {
				<-start
				results[i], errs[i] = b.client.Enqueue(t.Context(), countArgs{Count: i}, &jobs.EnqueueOptions{IdempotencyKey: "race"})
			})
		}
		close(start)
		wg.Wait()

		var fresh int
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("goroutine %d: %v", i, errs[i])
			}
			if results[i].Task.ID != results[0].Task.ID {
				t.Errorf("goroutine %d got task %d; goroutine 0 got %d", i, results[i].Task.ID, results[0].Task.ID)
			}
			if !results[i].Duplicate {
				fresh++
			}
		}
		if fresh != 1 {
			t.Errorf("%d results with Duplicate=false; want exactly 1", fresh)
		}
		tasks := b.listAll(t)
		if len(tasks) != 1 {
			t.Fatalf("%d tasks; want exactly 1", len(tasks))
		}
		if tasks[0].ID != results[0].Task.ID || tasks[0].IdempotencyKey != "race" {
			t.Errorf("surviving task %+v; want id %d with key race", tasks[0], results[0].Task.ID)
		}
		if k := b.countKeys(t); k != 1 {
			t.Errorf("%d keys; want 1", k)
		}
	})

	t.Run("SameKeyWithinEnqueueMany", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res, err := b.client.EnqueueMany(t.Context(), []jobs.EnqueueParams{
			{Args: countArgs{Count: 1}, Options: &jobs.EnqueueOptions{IdempotencyKey: "dup"}},
			{Args: countArgs{Count: 2}, Options: &jobs.EnqueueOptions{IdempotencyKey: "dup"}},
			{Args: countArgs{Count: 3}, Options: &jobs.EnqueueOptions{IdempotencyKey: "other"}},
		})
		if err != nil {
			t.Fatalf("EnqueueMany: %v", err)
		}
		if res[0].Duplicate || !res[1].Duplicate || res[2].Duplicate {
			t.Errorf("Duplicate flags = %v %v %v; want false true false", res[0].Duplicate, res[1].Duplicate, res[2].Duplicate)
		}
		if res[1].Task.ID != res[0].Task.ID {
			t.Errorf("second item got task %d; want the first's %d", res[1].Task.ID, res[0].Task.ID)
		}
		if res[2].Task.ID == res[0].Task.ID {
			t.Error("item with another key got the same task")
		}
		if tasks := b.listAll(t); len(tasks) != 2 {
			t.Errorf("%d tasks; want 2", len(tasks))
		}
	})

	t.Run("KeyFreedWhenTaskDeleted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := b.enqueue(t, countArgs{Count: 1}, &jobs.EnqueueOptions{IdempotencyKey: "gone"})
		tag, err := b.pool.Exec(t.Context(), "DELETE FROM river_job WHERE id = $1", first.Task.ID)
		if err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("delete task: %v (%d rows)", err, tag.RowsAffected())
		}
		if n := b.countKeys(t); n != 0 {
			t.Fatalf("%d keys after deleting their task; want 0 (ON DELETE CASCADE)", n)
		}
		second := b.enqueue(t, countArgs{Count: 2}, &jobs.EnqueueOptions{IdempotencyKey: "gone"})
		if second.Duplicate || second.Task.ID == first.Task.ID {
			t.Errorf("after delete: Duplicate = %v, id %d (deleted %d); want a new task", second.Duplicate, second.Task.ID, first.Task.ID)
		}
		if n := b.countKeys(t); n != 1 {
			t.Errorf("%d keys; want 1", n)
		}
	})

	t.Run("KeyHeldByFinishedTask", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := b.enqueue(t, countArgs{Count: 1}, &jobs.EnqueueOptions{IdempotencyKey: "done"})
		if _, err := b.client.Cancel(t.Context(), first.Task.ID); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		again := b.enqueue(t, countArgs{Count: 1}, &jobs.EnqueueOptions{IdempotencyKey: "done"})
		if !again.Duplicate || again.Task.ID != first.Task.ID || again.Task.State != jobs.StateCancelled {
			t.Errorf("result = Duplicate %v, %+v; want the cancelled task %d", again.Duplicate, again.Task, first.Task.ID)
		}
	})
}

func TestClientList(t *testing.T) {
	t.Parallel()

	b := setup(t)
	ctx := t.Context()
	// Fixtures, in id order:
	t1 := b.enqueue(t, countArgs{Count: 1}, &jobs.EnqueueOptions{Tags: []string{"red", "blue"}}).Task           // counting, queued
	t2 := b.enqueue(t, countArgs{Count: 2}, &jobs.EnqueueOptions{Queue: "other-q", Tags: []string{"red"}}).Task // other-q, queued
	t3 := b.enqueue(t, otherArgs{Note: "3"}, &jobs.EnqueueOptions{Tags: []string{"blue"}}).Task                 // default, queued
	t4 := b.enqueue(t, otherArgs{Note: "4"}, &jobs.EnqueueOptions{Delay: time.Hour}).Task                       // default, scheduled
	t5 := b.enqueue(t, countArgs{Count: 5}, &jobs.EnqueueOptions{Tags: []string{"red", "blue", "green"}}).Task  // counting, cancelled
	if _, err := b.client.Cancel(ctx, t5.ID); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	all := []int64{t1.ID, t2.ID, t3.ID, t4.ID, t5.ID}

	filters := []struct {
		name   string
		params jobs.ListParams
		want   []int64
	}{
		{"NoFilter", jobs.ListParams{}, all},
		{"StateQueued", jobs.ListParams{States: []jobs.State{jobs.StateQueued}}, []int64{t1.ID, t2.ID, t3.ID}},
		{"StateScheduled", jobs.ListParams{States: []jobs.State{jobs.StateScheduled}}, []int64{t4.ID}},
		{"StateCancelled", jobs.ListParams{States: []jobs.State{jobs.StateCancelled}}, []int64{t5.ID}},
		{"StatesQueuedOrScheduled", jobs.ListParams{States: []jobs.State{jobs.StateQueued, jobs.StateScheduled}}, []int64{t1.ID, t2.ID, t3.ID, t4.ID}},
		{"StateNoMatch", jobs.ListParams{States: []jobs.State{jobs.StateCompleted}}, nil},
		{"Type", jobs.ListParams{Types: []string{"test.other"}}, []int64{t3.ID, t4.ID}},
		{"Types", jobs.ListParams{Types: []string{"test.other", "test.count"}}, all},
		{"TypeNoMatch", jobs.ListParams{Types: []string{"test.email"}}, nil},
		{"Queue", jobs.ListParams{Queues: []string{"other-q"}}, []int64{t2.ID}},
		{"Queues", jobs.ListParams{Queues: []string{"counting", "default"}}, []int64{t1.ID, t3.ID, t4.ID, t5.ID}},
		{"Tag", jobs.ListParams{Tags: []string{"red"}}, []int64{t1.ID, t2.ID, t5.ID}},
		{"TagsAll", jobs.ListParams{Tags: []string{"red", "blue"}}, []int64{t1.ID, t5.ID}},
		{"TagNoMatch", jobs.ListParams{Tags: []string{"purple"}}, nil},
		{"Combined", jobs.ListParams{Types: []string{"test.count"}, States: []jobs.State{jobs.StateQueued}, Tags: []string{"red"}}, []int64{t1.ID, t2.ID}},
	}
	for _, tt := range filters {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := b.client.List(t.Context(), tt.params)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if got := ids(res.Tasks); !slices.Equal(got, tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
				t.Errorf("ids = %v; want %v", got, tt.want)
			}
			if res.NextCursor != "" {
				t.Errorf("NextCursor = %q on a short page; want empty", res.NextCursor)
			}
		})
	}

	t.Run("TasksAreComplete", func(t *testing.T) {
		t.Parallel()
		res, err := b.client.List(t.Context(), jobs.ListParams{States: []jobs.State{jobs.StateQueued}, Queues: []string{"counting"}})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if len(res.Tasks) != 1 {
			t.Fatalf("%d tasks; want 1", len(res.Tasks))
		}
		requireSameTask(t, res.Tasks[0], t1)
	})

	t.Run("InvalidState", func(t *testing.T) {
		t.Parallel()
		_, err := b.client.List(t.Context(), jobs.ListParams{States: []jobs.State{"available"}})
		requireValidationError(t, err, "state")
	})

	for _, limit := range []int{-1, 1001} {
		t.Run(fmt.Sprintf("InvalidLimit%d", limit), func(t *testing.T) {
			t.Parallel()
			_, err := b.client.List(t.Context(), jobs.ListParams{Limit: limit})
			requireValidationError(t, err, "limit")
		})
	}

	malformed := []struct{ name, cursor string }{
		{"NotBase64", "!!not a cursor!!"},
		{"Base64OfGarbage", base64.RawURLEncoding.EncodeToString([]byte("garbage"))},
		{"Base64OfBase64OfGarbage", base64.RawURLEncoding.EncodeToString([]byte(base64.URLEncoding.EncodeToString([]byte("{nope"))))},
	}
	for _, tt := range malformed {
		t.Run("MalformedCursor_"+tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := b.client.List(t.Context(), jobs.ListParams{Cursor: tt.cursor})
			requireValidationError(t, err, "cursor")
		})
	}
}

func TestClientListPagination(t *testing.T) {
	t.Parallel()

	// walk pages through List with p until NextCursor is empty and returns
	// the ids and the size of each page.
	walk := func(t *testing.T, b *testBundle, p jobs.ListParams) (got []int64, sizes []int) {
		t.Helper()
		for range 20 {
			res, err := b.client.List(t.Context(), p)
			if err != nil {
				t.Fatalf("List page %d: %v", len(sizes)+1, err)
			}
			got = append(got, ids(res.Tasks)...)
			sizes = append(sizes, len(res.Tasks))
			if res.NextCursor == "" {
				return got, sizes
			}
			p.Cursor = res.NextCursor
		}
		t.Fatalf("pagination did not end after 20 pages; ids so far %v", got)
		return nil, nil
	}

	t.Run("FivePagesOfTwo", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var want []int64
		for i := range 5 {
			want = append(want, b.enqueue(t, countArgs{Count: i}, nil).Task.ID)
		}
		got, sizes := walk(t, b, jobs.ListParams{Limit: 2})
		if !slices.Equal(got, want) {
			t.Errorf("walked ids %v; want %v in id order", got, want)
		}
		if !slices.Equal(sizes, []int{2, 2, 1}) {
			t.Errorf("page sizes %v; want [2 2 1]", sizes)
		}
	})

	t.Run("WithFilter", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var want []int64
		for i := range 6 {
			if i%2 == 0 {
				want = append(want, b.enqueue(t, countArgs{Count: i}, nil).Task.ID)
			} else {
				b.enqueue(t, otherArgs{}, nil)
			}
		}
		got, _ := walk(t, b, jobs.ListParams{Limit: 1, Types: []string{"test.count"}})
		if !slices.Equal(got, want) {
			t.Errorf("walked ids %v; want %v", got, want)
		}
	})

	t.Run("ExactMultipleEndsWithEmptyPage", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var want []int64
		for i := range 4 {
			want = append(want, b.enqueue(t, countArgs{Count: i}, nil).Task.ID)
		}
		got, sizes := walk(t, b, jobs.ListParams{Limit: 2})
		if !slices.Equal(got, want) {
			t.Errorf("walked ids %v; want %v", got, want)
		}
		// A full page cannot know it is the last; the next one is empty.
		if len(sizes) < 2 || sizes[len(sizes)-1] > 2 {
			t.Errorf("page sizes %v; want full pages then a final short or empty one", sizes)
		}
	})
}

func TestClientCancel(t *testing.T) {
	t.Parallel()

	t.Run("Queued", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.enqueue(t, countArgs{Count: 1}, nil).Task
		got, err := b.client.Cancel(t.Context(), task.ID)
		if err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		if got.ID != task.ID || got.State != jobs.StateCancelled || got.FinalizedAt == nil {
			t.Errorf("Cancel returned %+v; want task %d cancelled with finalized_at", got, task.ID)
		}
		stored, err := b.client.Get(t.Context(), task.ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if stored.State != jobs.StateCancelled {
			t.Errorf("stored state = %s; want cancelled", stored.State)
		}
		// Cancelling again changes nothing.
		again, err := b.client.Cancel(t.Context(), task.ID)
		if err != nil || again.State != jobs.StateCancelled {
			t.Errorf("second Cancel = %+v, %v; want cancelled, nil", again, err)
		}
	})

	t.Run("Scheduled", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.enqueue(t, countArgs{Count: 1}, &jobs.EnqueueOptions{Delay: time.Hour}).Task
		got, err := b.client.Cancel(t.Context(), task.ID)
		if err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		if got.State != jobs.StateCancelled {
			t.Errorf("state = %s; want cancelled", got.State)
		}
	})

	t.Run("Unknown", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		got, err := b.client.Cancel(t.Context(), 123456)
		if !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("err = %v; want ErrNotFound", err)
		}
		if got != nil {
			t.Errorf("Cancel returned %+v; want nil", got)
		}
	})
}

func TestClientRetry(t *testing.T) {
	t.Parallel()

	t.Run("Cancelled", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.enqueue(t, countArgs{Count: 1}, nil).Task
		if _, err := b.client.Cancel(t.Context(), task.ID); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		got, err := b.client.Retry(t.Context(), task.ID)
		if err != nil {
			t.Fatalf("Retry: %v", err)
		}
		if got.ID != task.ID || got.State != jobs.StateQueued || got.FinalizedAt != nil {
			t.Errorf("Retry returned %+v; want task %d queued, not finalized", got, task.ID)
		}
		stored, err := b.client.Get(t.Context(), task.ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if stored.State != jobs.StateQueued {
			t.Errorf("stored state = %s; want queued", stored.State)
		}
	})

	t.Run("Unknown", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		got, err := b.client.Retry(t.Context(), 123456)
		if !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("err = %v; want ErrNotFound", err)
		}
		if got != nil {
			t.Errorf("Retry returned %+v; want nil", got)
		}
	})

	t.Run("InProgressIsInvalidState", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.enqueue(t, countArgs{Count: 1}, nil).Task
		// No workers run here: put the row in River's running state by hand.
		if _, err := b.pool.Exec(t.Context(), "UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() WHERE id = $1", task.ID); err != nil {
			t.Fatalf("mark running: %v", err)
		}
		_, err := b.client.Retry(t.Context(), task.ID)
		if !errors.Is(err, jobs.ErrInvalidState) {
			t.Errorf("err = %v; want ErrInvalidState", err)
		}
		stored, err := b.client.Get(t.Context(), task.ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if stored.State != jobs.StateInProgress {
			t.Errorf("state = %s; want in_progress, untouched", stored.State)
		}
	})
}

func TestClientGetUnknown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	got, err := b.client.Get(t.Context(), 987654)
	if !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("err = %v; want ErrNotFound", err)
	}
	if got != nil {
		t.Errorf("Get returned %+v; want nil", got)
	}
}

func TestClientTaskMetadataRoundTrip(t *testing.T) {
	t.Parallel()

	t.Run("TimeoutAndKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.enqueue(t, countArgs{Count: 1}, &jobs.EnqueueOptions{Timeout: 90 * time.Second, IdempotencyKey: "order-42"}).Task
		check := func(where string, got *jobs.Task) {
			t.Helper()
			if got.Timeout != 90*time.Second || got.IdempotencyKey != "order-42" {
				t.Errorf("%s: Timeout %s, IdempotencyKey %q; want 1m30s, order-42", where, got.Timeout, got.IdempotencyKey)
			}
			if d := got.TimeoutOr(time.Minute); d != 90*time.Second {
				t.Errorf("%s: TimeoutOr(1m) = %s; want the task's own 1m30s", where, d)
			}
		}
		check("Enqueue", task)
		got, err := b.client.Get(t.Context(), task.ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		check("Get", got)
		listed := b.listAll(t)
		if len(listed) != 1 {
			t.Fatalf("%d tasks; want 1", len(listed))
		}
		check("List", listed[0])

		// Stored in River's metadata under "switchyard".
		var timeoutMS int64
		var key string
		err = b.pool.QueryRow(t.Context(),
			"SELECT (metadata->'switchyard'->>'timeout_ms')::bigint, metadata->'switchyard'->>'idempotency_key' FROM river_job WHERE id = $1",
			task.ID).Scan(&timeoutMS, &key)
		if err != nil {
			t.Fatalf("read metadata: %v", err)
		}
		if timeoutMS != 90000 || key != "order-42" {
			t.Errorf("metadata timeout_ms %d, idempotency_key %q; want 90000, order-42", timeoutMS, key)
		}
	})

	// Metadata keeps whole milliseconds. A shorter timeout that validation
	// accepts must not be silently dropped (the task would then run with
	// its type's timeout, 1 minute by default): reject it or keep it.
	t.Run("SubMillisecondTimeoutNotDropped", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		res, err := b.client.Enqueue(t.Context(), countArgs{Count: 1}, &jobs.EnqueueOptions{Timeout: 500 * time.Microsecond})
		if err != nil {
			requireValidationError(t, err, "timeout")
			b.requireNoTasks(t)
			return
		}
		got, err := b.client.Get(t.Context(), res.Task.ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if got.Timeout <= 0 {
			t.Errorf("Enqueue accepted Timeout 500µs but the task has Timeout %s: TimeoutOr(1m) = %s, so it would run with the type's timeout", got.Timeout, got.TimeoutOr(time.Minute))
		}
	})

	t.Run("NoneSet", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		task := b.enqueue(t, countArgs{Count: 1}, nil).Task
		got, err := b.client.Get(t.Context(), task.ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if got.Timeout != 0 || got.IdempotencyKey != "" {
			t.Errorf("Timeout %s, IdempotencyKey %q; want 0 and empty", got.Timeout, got.IdempotencyKey)
		}
		if d := got.TimeoutOr(time.Minute); d != time.Minute {
			t.Errorf("TimeoutOr(1m) = %s; want the default 1m", d)
		}
	})
}
