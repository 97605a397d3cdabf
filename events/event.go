// Package events streams what happens to tasks and workflow executions, as
// made by every pod. Migration 000010's triggers on river_job send one
// Postgres notification per statement that inserts tasks or changes their
// state (channel Channel); migration 000014's trigger on
// switchyard_execution_event sends one per statement that appends to an
// execution's history (channel ExecutionChannel). A Broker listens on both
// with one connection per process and fans each statement's changes out, as
// a Batch, to its subscribers (the API's /v1/events, later the dashboard).
//
// The stream is a live view, not a log: Postgres drops notifications sent
// while nobody listens, and a subscriber that falls behind loses batches
// rather than slowing anyone down. Both are reported in-band (Batch.Resync,
// Batch.Truncated), so a subscriber knows when to re-read what it shows
// instead of silently going stale.
package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/switchyard/switchyard/jobs"
)

// The Postgres notification channels the broker listens on.
const (
	// Channel carries task state changes, from the triggers of migration
	// 000010.
	Channel = "switchyard_task_events"
	// ExecutionChannel carries execution history events, from the trigger
	// of migration 000014.
	ExecutionChannel = "switchyard_execution_events"
)

// Event is one task state change.
type Event struct {
	// TaskID is the task's ID.
	TaskID int64 `json:"id"`
	// Type is the task type (River's kind).
	Type string `json:"type"`
	// Queue is the task's queue.
	Queue string `json:"queue"`
	// State is the state the task entered.
	State jobs.State `json:"state"`
	// Attempt is the task's attempt count after the change: 0 until first
	// claimed, then incremented by each claim.
	Attempt int `json:"attempt"`
	// At is when Postgres made the change (the end of the statement, by the
	// database's clock), not when it committed or was received.
	At time.Time `json:"at"`
}

// ExecutionEvent is one entry appended to a workflow execution's history
// (a row of switchyard_execution_event, without its data).
type ExecutionEvent struct {
	// ID is the history entry's ID (switchyard_execution_event.id). IDs
	// are allocated in insert order, not commit order, so the stream may
	// deliver a later ID before an earlier one of a concurrent transaction.
	ID int64 `json:"id"`
	// ExecutionID is the execution's ID.
	ExecutionID int64 `json:"execution_id"`
	// Type is what happened, as the workflow engine names it
	// ("step_completed", ...).
	Type string `json:"type"`
	// Step is the key of the step it happened to, empty for events of the
	// whole execution.
	Step string `json:"step,omitempty"`
	// At is the entry's time, as recorded in the history (the database's
	// clock, not the commit).
	At time.Time `json:"at"`
}

// Batch is what subscribers receive: the changes of one statement, from one
// notification. A batch carries either task state changes (Events, oldest
// task first) or execution history entries (Executions, oldest first),
// never both; a subscriber that wants only one kind skips batches of the
// other. Its slices are shared by every subscriber and must not be
// modified. Batches arrive in commit order, whichever their kind.
//
// A batch may also tell the subscriber that its picture is incomplete and
// it should re-read what it shows (NeedsRefresh):
//
//   - Truncated > 0: that many changes are not listed. Either the
//     statement made more changes than one notification can carry (the
//     triggers list at most 50), or this subscriber fell behind and batches
//     queued for it were merged into this one (then nothing is listed). The
//     count is exact: every change is either delivered or counted. It does
//     not say which kind the missing changes were: a merged batch may count
//     both, and a statement's unlisted changes may leave the batch with no
//     listed change to tell its kind by.
//   - Resync: changes may have been lost without being counted, because the
//     broker's connection to Postgres was down (it has just been
//     re-established) or a notification could not be read.
type Batch struct {
	// Events are the task state changes listed, oldest task first.
	Events []Event
	// Executions are the execution history entries listed, oldest first.
	Executions []ExecutionEvent
	// Truncated counts changes, of either kind, not listed.
	Truncated int
	// Resync reports that changes may have been lost uncounted.
	Resync bool
}

// NeedsRefresh reports whether changes are missing from the stream up to and
// including this batch, so a subscriber should re-read what it shows.
func (b Batch) NeedsRefresh() bool {
	return b.Truncated > 0 || b.Resync
}

// changes is how many changes b stands for, of either kind, delivered or
// not.
func (b Batch) changes() int {
	return len(b.Events) + len(b.Executions) + b.Truncated
}

// parseBatch decodes the payload of a notification received on channel.
func parseBatch(channel, payload string) (Batch, error) {
	switch channel {
	case Channel:
		return parseTaskBatch(payload)
	case ExecutionChannel:
		return parseExecutionBatch(payload)
	default:
		return Batch{}, fmt.Errorf("notification on unexpected channel %q", channel)
	}
}

// taskNotification is the task triggers' payload; see migration 000010.
type taskNotification struct {
	At    time.Time `json:"at"`
	Tasks []struct {
		ID      int64  `json:"id"`
		Type    string `json:"type"`
		Queue   string `json:"queue"`
		State   string `json:"state"`
		Attempt int    `json:"attempt"`
	} `json:"tasks"`
	Truncated int `json:"truncated"`
}

// parseTaskBatch decodes a task notification payload into a Batch with
// Switchyard state names.
func parseTaskBatch(payload string) (Batch, error) {
	var n taskNotification
	if err := json.Unmarshal([]byte(payload), &n); err != nil {
		return Batch{}, fmt.Errorf("decode task event payload: %w", err)
	}
	if n.Truncated < 0 || len(n.Tasks)+n.Truncated == 0 {
		return Batch{}, errors.New("decode task event payload: no changes in it")
	}
	b := Batch{Events: make([]Event, len(n.Tasks)), Truncated: n.Truncated}
	for i, t := range n.Tasks {
		b.Events[i] = Event{
			TaskID:  t.ID,
			Type:    t.Type,
			Queue:   t.Queue,
			State:   jobs.StateFromRiver(rivertype.JobState(t.State)),
			Attempt: t.Attempt,
			At:      n.At,
		}
	}
	return b, nil
}

// executionNotification is the execution event trigger's payload; see
// migration 000014. Its entries have ExecutionEvent's JSON form.
type executionNotification struct {
	Executions []ExecutionEvent `json:"executions"`
	Truncated  int              `json:"truncated"`
}

// parseExecutionBatch decodes an execution event notification payload.
func parseExecutionBatch(payload string) (Batch, error) {
	var n executionNotification
	if err := json.Unmarshal([]byte(payload), &n); err != nil {
		return Batch{}, fmt.Errorf("decode execution event payload: %w", err)
	}
	if n.Truncated < 0 || len(n.Executions)+n.Truncated == 0 {
		return Batch{}, errors.New("decode execution event payload: no changes in it")
	}
	for _, e := range n.Executions {
		if e.ID <= 0 || e.ExecutionID <= 0 || e.Type == "" || e.At.IsZero() {
			return Batch{}, fmt.Errorf("decode execution event payload: incomplete entry %+v", e)
		}
	}
	return Batch{Executions: n.Executions, Truncated: n.Truncated}, nil
}
