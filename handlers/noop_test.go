package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/switchyard/switchyard/jobs"
)

// newTask builds the task a worker would hand a handler, with args as JSON.
func newTask(t *testing.T, args jobs.Args) *jobs.Task {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatalf("marshal args: %v", err)
	}
	return &jobs.Task{ID: 42, Type: args.TaskType(), Args: b, Attempt: 1, MaxAttempts: 10}
}

func TestNoopHandler(t *testing.T) {
	t.Parallel()
	out, err := NewNoopHandler().ProcessTask(context.Background(), newTask(t, NoopArgs{}))
	if out != nil || err != nil {
		t.Fatalf("noop = %v, %v; want nil, nil", out, err)
	}
}

func TestNoopHandlerRejectsNonObjectArgs(t *testing.T) {
	t.Parallel()
	task := &jobs.Task{ID: 1, Type: "noop", Args: json.RawMessage(`[1,2]`)}
	_, err := NewNoopHandler().ProcessTask(context.Background(), task)
	var perm *jobs.PermanentError
	if !errors.As(err, &perm) {
		t.Fatalf("err = %v; want a *jobs.PermanentError", err)
	}
}
