package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/dbtest"
	"github.com/switchyard/switchyard/jobs"
)

func TestEnqueueErrors(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	env := testEnv(t, dbURL)

	for _, c := range []struct {
		name string
		args []string
		want []string // substrings of the error
	}{
		{"unknown type", []string{"enqueue", "frobnicate"}, []string{`"frobnicate"`, "http.request", "noop", "sleep"}},
		{"args of the wrong type", []string{"enqueue", "sleep", "--args", `{"duration":5}`}, []string{"args.duration"}},
		{"unknown field", []string{"enqueue", "noop", "--args", `{"bogus":1}`}, []string{"args.bogus"}},
		{"args not JSON", []string{"enqueue", "noop", "--args", "not json"}, []string{"--args", "JSON"}},
		{"missing type", []string{"enqueue"}, []string{"missing task TYPE"}},
		{"missing type, flags only", []string{"enqueue", "--args", "{}"}, []string{"missing task TYPE"}},
		{"extra argument", []string{"enqueue", "noop", "extra"}, []string{"unexpected arguments"}},
		{"bad priority", []string{"enqueue", "noop", "--priority", "9"}, []string{"priority"}},
		{"unknown flag", []string{"enqueue", "noop", "--frob"}, []string{"frob"}},
	} {
		msg := runErr(t, env, c.args...)
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: switchyard %s: error %q does not mention %q", c.name, strings.Join(c.args, " "), msg, w)
			}
		}
	}

	// None of the refused commands inserted anything.
	client := newJobsClient(t, dbURL)
	page, err := client.List(t.Context(), jobs.ListParams{Limit: 10})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(page.Tasks) != 0 {
		t.Errorf("refused enqueues left %d tasks, want 0", len(page.Tasks))
	}
}

func TestEnqueueIdempotencyKey(t *testing.T) {
	t.Parallel()
	env := testEnv(t, dbtest.NewDatabase(t))

	first := mustRun(t, env, "enqueue", "noop", "--idempotency-key", "k")
	var id1 int64
	if _, err := fmt.Sscanf(first, "enqueued task %d:", &id1); err != nil {
		t.Fatalf("first enqueue printed %q: %v", first, err)
	}
	second := mustRun(t, env, "enqueue", "noop", "--idempotency-key", "k")
	if !strings.HasPrefix(second, "already enqueued") {
		t.Fatalf("second enqueue with the same key printed %q, want it to say \"already enqueued\"", second)
	}
	if want := fmt.Sprintf(" task %d:", id1); !strings.Contains(second, want) {
		t.Errorf("second enqueue printed %q, want the first task (%q)", second, want)
	}
	// Another key is another task.
	third := mustRun(t, env, "enqueue", "noop", "--idempotency-key", "other")
	if !strings.HasPrefix(third, "enqueued task ") || strings.Contains(third, fmt.Sprintf(" task %d:", id1)) {
		t.Errorf("enqueue with another key printed %q, want a new task", third)
	}
}

func TestEnqueueOptionsReachTask(t *testing.T) {
	t.Parallel()
	env := testEnv(t, dbtest.NewDatabase(t))
	out := mustRun(t, env, "enqueue", "sleep", "--args", `{"duration":"10ms"}`,
		"--queue", "email", "--priority", "3", "--max-attempts", "7", "--delay", "1h",
		"--tag", "one-tag", "--tag", "two-tag", "--json")
	var task jobs.Task
	if err := json.Unmarshal([]byte(out), &task); err != nil {
		t.Fatalf("enqueue --json printed %q: %v", out, err)
	}
	if task.Type != "sleep" || task.Queue != "email" || task.Priority != 3 || task.MaxAttempts != 7 ||
		task.State != jobs.StateScheduled || strings.Join(task.Tags, ",") != "one-tag,two-tag" {
		t.Errorf("enqueued task = %+v, want sleep on email, priority 3, 7 attempts, scheduled, tags one-tag,two-tag", task)
	}
	var args map[string]any
	if err := json.Unmarshal(task.Args, &args); err != nil || len(args) != 1 || args["duration"] != "10ms" {
		t.Errorf("task args = %s (%v), want the --args given", task.Args, err)
	}
}
