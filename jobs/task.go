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
	TimeoutMS      int64  `json:"timeout_ms,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
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
		Errors:         make([]AttemptError, len(row.Errors)),
	}
	if t.Tags == nil {
		t.Tags = []string{}
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
