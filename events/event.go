// Package events streams task state changes made by every pod. Migration
// 000010's triggers on river_job send one Postgres notification per statement
// that inserts tasks or changes their state; a Broker listens for them on one
// connection per process and fans each statement's changes out, as a Batch,
// to its subscribers (the API's /v1/events, later the dashboard).
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

// Channel is the Postgres notification channel the triggers of migration
// 000010 notify on.
const Channel = "switchyard_task_events"

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

// Batch is what subscribers receive: the changes of one statement, oldest
// task first. Its Events slice is shared by every subscriber and must not be
// modified.
//
// A batch may also tell the subscriber that its picture is incomplete and
// it should re-read the tasks it shows (NeedsRefresh):
//
//   - Truncated > 0: that many changes are not in Events. Either the
//     statement changed more tasks than one notification can carry (the
//     trigger lists at most 50), or this subscriber fell behind and batches
//     queued for it were merged into this one (then Events is empty). The
//     count is exact: every change is either delivered or counted.
//   - Resync: changes may have been lost without being counted, because the
//     broker's connection to Postgres was down (it has just been
//     re-established) or a notification could not be read.
type Batch struct {
	// Events are the changes listed, oldest task first.
	Events []Event
	// Truncated counts changes not listed in Events.
	Truncated int
	// Resync reports that changes may have been lost uncounted.
	Resync bool
}

// NeedsRefresh reports whether changes are missing from the stream up to and
// including this batch, so a subscriber should re-read what it shows.
func (b Batch) NeedsRefresh() bool {
	return b.Truncated > 0 || b.Resync
}

// changes is how many task changes b stands for, delivered or not.
func (b Batch) changes() int {
	return len(b.Events) + b.Truncated
}

// notification is the trigger's payload; see migration 000010.
type notification struct {
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

// parseBatch decodes a notification payload into a Batch with Switchyard
// state names.
func parseBatch(payload string) (Batch, error) {
	var n notification
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
