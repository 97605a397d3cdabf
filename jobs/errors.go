package jobs

import (
	"errors"
	"fmt"
	"time"
)

// ErrNotFound is returned when a task does not exist (or no longer exists:
// River's cleaner deletes finished tasks after their retention period).
var ErrNotFound = errors.New("task not found")

// ErrUnknownType is returned when a task type has not been registered.
var ErrUnknownType = errors.New("unknown task type")

// ErrInvalidState is returned when an operation does not apply to a task in
// its current state (for example retrying a task that is in progress).
var ErrInvalidState = errors.New("operation not valid in the task's state")

// ValidationError reports bad input to the producer API, naming the field.
type ValidationError struct {
	Field   string // the offending field, e.g. "args.url" or "queue"
	Message string
	// Err is the underlying error, if any (ErrUnknownType for a "type").
	Err error
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Message }

// Unwrap returns the underlying error.
func (e *ValidationError) Unwrap() error { return e.Err }

// PermanentError marks a handler error that must not be retried: the task
// fails at once whatever attempts remain. Build it with Permanent.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err so the task fails at once instead of retrying.
// Permanent(nil) returns nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// RetryAfterError asks for the next attempt no earlier than After from now,
// overriding the backoff of the retry policy. The attempt still counts: when
// attempts are exhausted the task fails. Build it with RetryAfter.
type RetryAfterError struct {
	After time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("retry after %s: %v", e.After, e.Err)
}
func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter wraps err so the next attempt runs after d (e.g. an HTTP 429's
// Retry-After). A negative d is treated as zero.
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		err = errors.New("retry requested")
	}
	return &RetryAfterError{After: max(d, 0), Err: err}
}

// SnoozeError re-queues the task to run after Duration without using an
// attempt. Build it with Snooze.
type SnoozeError struct{ Duration time.Duration }

func (e *SnoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.Duration) }

// Snooze returns an error that re-queues the task after d without counting an
// attempt. A handler that snoozes forever never fails; bound it yourself.
func Snooze(d time.Duration) error { return &SnoozeError{Duration: max(d, 0)} }

// PanicError is a handler panic turned into an error; Stack is the goroutine
// stack at the panic so the task's error history shows where it happened.
type PanicError struct {
	Value any
	Stack string
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v\n%s", e.Value, e.Stack) }
