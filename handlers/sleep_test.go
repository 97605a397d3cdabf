package handlers

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchyard/switchyard/jobs"
)

func TestSleepArgsValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		duration string
		wantErr  bool
	}{
		{"250ms", false},
		{"0s", false},
		{"24h", false},
		{"", true},
		{"soon", true},
		{"250", true}, // a bare number is not a Go duration
		{"-1s", true},
		{"24h0m0.001s", true},
	}
	for _, tt := range tests {
		t.Run(tt.duration, func(t *testing.T) {
			t.Parallel()
			err := SleepArgs{Duration: tt.duration}.Validate()
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("Validate() = %v; want nil", err)
				}
				return
			}
			var ve *jobs.ValidationError
			if !errors.As(err, &ve) || ve.Field != "args.duration" {
				t.Fatalf("Validate() = %#v; want a ValidationError on args.duration", err)
			}
		})
	}
}

func TestSleepHandlerSleeps(t *testing.T) {
	t.Parallel()
	start := time.Now()
	out, err := NewSleepHandler().ProcessTask(context.Background(), newTask(t, SleepArgs{Duration: "20ms"}))
	if err != nil {
		t.Fatalf("ProcessTask: %v", err)
	}
	if elapsed := time.Since(start); elapsed < 20*time.Millisecond {
		t.Errorf("returned after %s; want at least 20ms", elapsed)
	}
	if want := (SleepOutput{Slept: "20ms"}); out != want {
		t.Errorf("output = %#v; want %#v", out, want)
	}
}

// runSleep starts a long sleep under ctx and returns its result channel.
func runSleep(t *testing.T, ctx context.Context) <-chan error {
	t.Helper()
	task := newTask(t, SleepArgs{Duration: "1h"})
	done := make(chan error, 1)
	go func() {
		_, err := NewSleepHandler().ProcessTask(ctx, task)
		done <- err
	}()
	return done
}

func TestSleepHandlerHonoursCancellation(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	done := runSleep(t, ctx)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v; want one wrapping context.Canceled", err)
		}
		var perm *jobs.PermanentError
		if errors.As(err, &perm) {
			t.Errorf("err = %v; cancellation must not be reported as a permanent failure", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("sleep handler did not return after cancellation")
	}
}

func TestSleepHandlerHonoursDeadline(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	select {
	case err := <-runSleep(t, ctx):
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v; want one wrapping context.DeadlineExceeded", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("sleep handler did not return after its deadline")
	}
}

func TestSleepHandlerRejectsInvalidArgsPermanently(t *testing.T) {
	t.Parallel()
	// Args that skipped validation at enqueue, e.g. inserted by another tool.
	_, err := NewSleepHandler().ProcessTask(context.Background(), newTask(t, SleepArgs{Duration: "-5s"}))
	var perm *jobs.PermanentError
	var ve *jobs.ValidationError
	if !errors.As(err, &perm) || !errors.As(err, &ve) || ve.Field != "args.duration" {
		t.Fatalf("err = %v; want a permanent ValidationError on args.duration", err)
	}
}
