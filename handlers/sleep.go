package handlers

import (
	"context"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/jobs"
)

// MaxSleep is the longest duration a sleep task accepts. RegisterBuiltins
// gives sleep an attempt timeout a little longer than this so that the sleep
// itself, not the timeout, ends a legitimate task.
const MaxSleep = 24 * time.Hour

// SleepArgs are the arguments of the sleep task type, which waits and then
// succeeds: useful to exercise timeouts, cancellation, shutdown and
// concurrency limits without side effects.
type SleepArgs struct {
	// Duration is a Go duration string such as "250ms" or "1m30s", from 0 to
	// MaxSleep. It is a string rather than nanoseconds so that JSON
	// producers can write it readably.
	Duration string `json:"duration"`
}

// TaskType implements jobs.Args.
func (SleepArgs) TaskType() string { return "sleep" }

// Validate implements jobs.Validator.
func (a SleepArgs) Validate() error {
	_, err := a.duration()
	return err
}

// duration parses and checks Duration; errors are *jobs.ValidationError.
func (a SleepArgs) duration() (time.Duration, error) {
	if a.Duration == "" {
		return 0, &jobs.ValidationError{Field: "args.duration", Message: `is required (a Go duration such as "250ms")`}
	}
	d, err := time.ParseDuration(a.Duration)
	if err != nil {
		return 0, &jobs.ValidationError{Field: "args.duration", Message: fmt.Sprintf(`%q is not a Go duration such as "250ms"`, a.Duration)}
	}
	if d < 0 {
		return 0, &jobs.ValidationError{Field: "args.duration", Message: "must not be negative"}
	}
	if d > MaxSleep {
		return 0, &jobs.ValidationError{Field: "args.duration", Message: fmt.Sprintf("must be at most %s", MaxSleep)}
	}
	return d, nil
}

// SleepOutput is the output of a completed sleep task.
type SleepOutput struct {
	// Slept is the duration slept, normalised by time.Duration.String.
	Slept string `json:"slept"`
}

// NewSleepHandler returns the handler of sleep. It waits on a timer rather
// than time.Sleep so that cancellation, an attempt timeout or shutdown end
// the task at once; it then returns the context's error, wrapped, so the
// task is reported as cancelled or timed out rather than as failed.
func NewSleepHandler() Handler {
	return Typed(func(ctx context.Context, _ *jobs.Task, args SleepArgs) (any, error) {
		d, err := args.duration()
		if err != nil {
			// Args that bypassed validation at enqueue will never become valid.
			return nil, jobs.Permanent(fmt.Errorf("sleep: %w", err))
		}
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
			return SleepOutput{Slept: d.String()}, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("sleep %s: %w", d, ctx.Err())
		}
	})
}
