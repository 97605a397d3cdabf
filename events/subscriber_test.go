package events

import (
	"testing"
	"time"

	"github.com/switchyard/switchyard/jobs"
)

// TestCoalesceCountsBothKinds: when a subscriber's buffer is full, batches
// of either kind merged into the last one waiting are counted, listed or
// truncated, and nothing listed survives the merge.
func TestCoalesceCountsBothKinds(t *testing.T) {
	t.Parallel()
	s := newSubscriber(2)
	now := time.Now()
	tasks := Batch{Events: []Event{{TaskID: 1, State: jobs.StateQueued, At: now}, {TaskID: 2, State: jobs.StateQueued, At: now}}}
	execs := Batch{Executions: []ExecutionEvent{{ID: 1, ExecutionID: 1, Type: "step_completed", At: now}}, Truncated: 4}

	s.push(tasks)                               // queued as is
	s.push(execs)                               // fills the buffer
	s.push(tasks)                               // merged: 5 + 2
	s.push(Batch{Executions: execs.Executions}) // + 1
	s.push(Batch{Resync: true})

	if len(s.queue) != 2 {
		t.Fatalf("%d batches queued, want 2", len(s.queue))
	}
	if first := s.queue[0]; len(first.Events) != 2 || len(first.Executions) != 0 || first.Truncated != 0 {
		t.Errorf("first batch = %+v, want the task batch untouched", first)
	}
	last := s.queue[1]
	if len(last.Events) != 0 || len(last.Executions) != 0 || last.Truncated != 5+2+1 || !last.Resync {
		t.Errorf("merged batch = %+v, want nothing listed, 8 truncated, resync", last)
	}
}

func TestParseExecutionBatch(t *testing.T) {
	t.Parallel()
	b, err := parseBatch(ExecutionChannel, `{"executions":[`+
		`{"id":7,"execution_id":3,"type":"step_completed","step":"a","at":"2026-01-02T03:04:05.123456+00:00"},`+
		`{"id":8,"execution_id":3,"type":"execution_completed","at":"2026-01-02T03:04:06+01:00"}],"truncated":2}`)
	if err != nil {
		t.Fatal(err)
	}
	want := []ExecutionEvent{
		{ID: 7, ExecutionID: 3, Type: "step_completed", Step: "a", At: time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)},
		{ID: 8, ExecutionID: 3, Type: "execution_completed", At: time.Date(2026, 1, 2, 2, 4, 6, 0, time.UTC)},
	}
	if len(b.Executions) != 2 || len(b.Events) != 0 || b.Truncated != 2 || b.Resync {
		t.Fatalf("batch = %+v", b)
	}
	for i, e := range b.Executions {
		if e.ID != want[i].ID || e.ExecutionID != want[i].ExecutionID || e.Type != want[i].Type || e.Step != want[i].Step || !e.At.Equal(want[i].At) {
			t.Errorf("entry %d = %+v, want %+v", i, e, want[i])
		}
	}
	if b.changes() != 4 {
		t.Errorf("changes() = %d, want 4", b.changes())
	}

	for _, bad := range []struct{ channel, payload string }{
		{ExecutionChannel, `not json`},
		{ExecutionChannel, `{"executions":[]}`},
		{ExecutionChannel, `{"executions":[],"truncated":-1}`},
		{ExecutionChannel, `{"tasks":[{"id":1,"type":"noop","queue":"default","state":"available","attempt":0}]}`},
		{ExecutionChannel, `{"executions":[{"id":1,"type":"x","at":"2026-01-02T03:04:05Z"}]}`},
		{Channel, `{"executions":[{"id":1,"execution_id":1,"type":"x","at":"2026-01-02T03:04:05Z"}]}`},
		{"elsewhere", `{"tasks":[],"truncated":1}`},
	} {
		if b, err := parseBatch(bad.channel, bad.payload); err == nil {
			t.Errorf("%s %s: parsed as %+v, want an error", bad.channel, bad.payload, b)
		}
	}
}
