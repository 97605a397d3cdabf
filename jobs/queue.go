package jobs

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/riverqueue/river"

	"github.com/switchyard/switchyard/db"
)

// ErrQueueNotFound is returned when pausing or resuming a queue no worker
// has ever served (River creates a queue's row when a pod first works it).
var ErrQueueNotFound = errors.New("queue not found")

// Queue is a queue's state: whether it is paused, and how many tasks wait
// in each non-final state.
type Queue struct {
	Name     string     `json:"name"`
	Paused   bool       `json:"paused"`
	PausedAt *time.Time `json:"paused_at,omitempty"`
	// Depth counts the queue's tasks per non-final state; every such state
	// is present, zero included.
	Depth map[State]int64 `json:"depth"`
	// OldestAge is the age in seconds of the oldest task per state: since it
	// became runnable for queued, since it started for in_progress, since it
	// was created otherwise. States without tasks are absent.
	OldestAge map[State]float64 `json:"oldest_age_seconds"`
}

// liveStates are the non-final states counted in Queue.Depth.
var liveStates = []State{StateWaiting, StateScheduled, StateQueued, StateInProgress, StateRetrying}

// QueueList returns every queue that has workers or live tasks, sorted by
// name.
func (c *Client) QueueList(ctx context.Context) ([]*Queue, error) {
	res, err := c.river.QueueList(ctx, river.NewQueueListParams().First(10000))
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", translate(err))
	}
	stats, err := db.QueueStats(ctx, c.pool)
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	byName := map[string]*Queue{}
	get := func(name string) *Queue {
		q, ok := byName[name]
		if !ok {
			q = &Queue{Name: name, Depth: map[State]int64{}, OldestAge: map[State]float64{}}
			for _, s := range liveStates {
				q.Depth[s] = 0
			}
			byName[name] = q
		}
		return q
	}
	for _, rq := range res.Queues {
		q := get(rq.Name)
		q.Paused, q.PausedAt = rq.PausedAt != nil, rq.PausedAt
	}
	for _, s := range stats {
		q := get(s.Queue)
		q.Depth[State(s.State)] = s.Count
		q.OldestAge[State(s.State)] = s.OldestAge.Seconds()
	}
	out := make([]*Queue, 0, len(byName))
	for _, q := range byName {
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// QueuePause stops every pod from claiming tasks of the queue; running
// tasks finish. It takes effect within milliseconds (River notifies the
// pods; they also poll once a minute). A queue no pod has served yet is
// created paused, so it can be paused before its workers start.
func (c *Client) QueuePause(ctx context.Context, name string) error {
	if err := db.RiverQueueEnsure(ctx, c.pool, name); err != nil {
		return fmt.Errorf("pause queue %q: %w", name, err)
	}
	if err := c.river.QueuePause(ctx, name, nil); err != nil {
		return fmt.Errorf("pause queue %q: %w", name, translateQueue(err))
	}
	return nil
}

// QueueResume lets pods claim tasks of a paused queue again.
func (c *Client) QueueResume(ctx context.Context, name string) error {
	if err := c.river.QueueResume(ctx, name, nil); err != nil {
		return fmt.Errorf("resume queue %q: %w", name, translateQueue(err))
	}
	return nil
}

func translateQueue(err error) error {
	if errors.Is(err, river.ErrNotFound) {
		return ErrQueueNotFound
	}
	return err
}
