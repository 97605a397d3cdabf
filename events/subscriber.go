package events

import "sync"

// subscriber is one Subscribe call: a bounded queue the broker pushes to
// without ever blocking, and a goroutine that hands the queue's batches to
// the subscriber's channel one at a time.
//
// The queue is a slice rather than the channel's own buffer because
// coalescing has to rewrite the newest waiting batch, and a value already in
// a channel cannot be changed.
type subscriber struct {
	out   chan Batch    // unbuffered: the queue is the buffer
	wake  chan struct{} // capacity 1: "the queue has something"
	done  chan struct{} // closed by stop
	ended chan struct{} // closed when forward has returned and out is closed
	once  sync.Once

	mu    sync.Mutex
	queue []Batch
	limit int
}

func newSubscriber(limit int) *subscriber {
	return &subscriber{
		out:   make(chan Batch),
		wake:  make(chan struct{}, 1),
		done:  make(chan struct{}),
		ended: make(chan struct{}),
		limit: limit,
	}
}

// push queues b for the subscriber. It never blocks: when limit batches are
// already waiting, b is merged into the last of them, which keeps only the
// count of the changes both stood for.
func (s *subscriber) push(b Batch) {
	s.mu.Lock()
	if len(s.queue) < s.limit {
		s.queue = append(s.queue, b)
	} else {
		last := &s.queue[len(s.queue)-1]
		*last = Batch{Truncated: last.changes() + b.changes(), Resync: last.Resync || b.Resync}
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default: // already signalled
	}
}

// forward delivers queued batches in order until stop, then closes out. It
// is the only sender on out, so closing here cannot race a send.
func (s *subscriber) forward() {
	defer close(s.ended)
	defer close(s.out)
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.mu.Unlock()
			select {
			case <-s.wake:
				continue
			case <-s.done:
				return
			}
		}
		next := s.queue[0]
		s.queue[0] = Batch{} // the backing array outlives the pop; drop the events now
		s.queue = s.queue[1:]
		s.mu.Unlock()

		select {
		case s.out <- next:
		case <-s.done:
			return
		}
	}
}

// stop ends forward, discarding whatever is still queued, and returns once
// out is closed. It may be called more than once.
func (s *subscriber) stop() {
	s.once.Do(func() { close(s.done) })
	<-s.ended
}
