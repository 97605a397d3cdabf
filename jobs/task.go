package jobs

import (
	"encoding/json"
	"time"

	"github.com/riverqueue/river/rivertype"
)

// Task is a task as users see it: a River job row in Switchyard's terms.
type Task struct {
	ID             int64           `json:"id"`
	Type           string          `json:"type"`
	Queue          string          `json:"queue"`
	State          State           `json:"state"`
	Args           json.RawMessage `json:"args"`
	Priority       int             `json:"priority"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"max_attempts"`
	Tags           []string        `json:"tags"`
	Timeout        time.Duration   `json:"-"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Errors         []AttemptError  `json:"errors"`
	Output         json.RawMessage `json:"output,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	ScheduledAt    time.Time       `json:"scheduled_at"`
	AttemptedAt    *time.Time      `json:"attempted_at,omitempty"`
	FinalizedAt    *time.Time      `json:"finalized_at,omitempty"`
	// Snoozes counts how often the task was snoozed (by its handler or by a
	// contended guard); snoozes use no attempt.
	Snoozes int `json:"snoozes"`
	// Workflow is set when the task acts for a workflow step. The
	// processing pipeline fills in its Input and Outputs before the handler
	// runs.
	Workflow *WorkflowRef `json:"workflow,omitempty"`
	// Retry overrides the backoff of the type's retry policy for this task
	// (workflow steps carry their own); nil uses the type's.
	Retry *RetryPolicy `json:"-"`
}

// WorkflowRef ties a task to the workflow step it acts for.
type WorkflowRef struct {
	ExecutionID int64  `json:"execution_id"`
	Step        string `json:"step"`
	// Role is what the task does for the step: "task" runs the step's
	// handler; the engine's own tasks are "delay", "wait_timeout",
	// "execution_timeout", "child_finished" and "cancel".
	Role string `json:"role"`
	// DependsOn are the step's dependencies, whose outputs its handler
	// needs in the context.
	DependsOn []string `json:"depends_on,omitempty"`
	// ChildID is the child execution of a "child_finished" task.
	ChildID int64 `json:"child_id,omitempty"`
	// Input and Outputs are the execution's context: its input and the
	// output of every completed step, by step key. Filled in for handlers.
	Input   json.RawMessage            `json:"-"`
	Outputs map[string]json.RawMessage `json:"-"`
}

// AttemptError is the error of one failed attempt.
type AttemptError struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Error   string    `json:"error"`
	// Trace is the stack of a panic, when the attempt panicked.
	Trace string `json:"trace,omitempty"`
}

// taskMeta is Switchyard's part of a River job's metadata.
type taskMeta struct {
	TimeoutMS      int64        `json:"timeout_ms,omitempty"`
	IdempotencyKey string       `json:"idempotency_key,omitempty"`
	Workflow       *WorkflowRef `json:"workflow,omitempty"`
	Retry          *retryMeta   `json:"retry,omitempty"`
}

// retryMeta is a task's own backoff, overriding its type's.
type retryMeta struct {
	InitialBackoffMS int64   `json:"initial_backoff_ms,omitempty"`
	Multiplier       float64 `json:"multiplier,omitempty"`
	MaxBackoffMS     int64   `json:"max_backoff_ms,omitempty"`
	Jitter           float64 `json:"jitter,omitempty"`
}

// metaKey is the key of taskMeta inside River's job metadata.
const metaKey = "switchyard"

type rowMeta struct {
	Switchyard taskMeta `json:"switchyard"`
	Snoozes    int      `json:"snoozes"`
}

// TaskFromRow converts a River job row.
func TaskFromRow(row *rivertype.JobRow) *Task {
	var meta rowMeta
	_ = json.Unmarshal(row.Metadata, &meta) // metadata is always a JSON object written by River or us
	t := &Task{
		ID:             row.ID,
		Type:           row.Kind,
		Queue:          row.Queue,
		State:          StateFromRiver(row.State),
		Args:           json.RawMessage(row.EncodedArgs),
		Priority:       row.Priority,
		Attempt:        row.Attempt,
		MaxAttempts:    row.MaxAttempts,
		Tags:           row.Tags,
		Timeout:        time.Duration(meta.Switchyard.TimeoutMS) * time.Millisecond,
		IdempotencyKey: meta.Switchyard.IdempotencyKey,
		Output:         json.RawMessage(row.Output()),
		CreatedAt:      row.CreatedAt,
		ScheduledAt:    row.ScheduledAt,
		AttemptedAt:    row.AttemptedAt,
		FinalizedAt:    row.FinalizedAt,
		Snoozes:        meta.Snoozes,
		Workflow:       meta.Switchyard.Workflow,
		Errors:         make([]AttemptError, len(row.Errors)),
	}
	if t.Tags == nil {
		t.Tags = []string{}
	}
	if r := meta.Switchyard.Retry; r != nil {
		t.Retry = &RetryPolicy{
			MaxAttempts:    row.MaxAttempts,
			InitialBackoff: time.Duration(r.InitialBackoffMS) * time.Millisecond,
			Multiplier:     r.Multiplier,
			MaxBackoff:     time.Duration(r.MaxBackoffMS) * time.Millisecond,
			Jitter:         r.Jitter,
		}
	}
	for i, e := range row.Errors {
		t.Errors[i] = AttemptError{Attempt: e.Attempt, At: e.At, Error: e.Error, Trace: e.Trace}
	}
	return t
}

// TimeoutOr returns the task's own timeout, or def when it has none.
func (t *Task) TimeoutOr(def time.Duration) time.Duration {
	if t.Timeout > 0 {
		return t.Timeout
	}
	return def
}
