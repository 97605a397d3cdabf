package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	// connectTimeout bounds one attempt to get a listening connection:
	// acquiring it (the pool may be exhausted), naming it and LISTEN. A
	// stuck attempt is logged and retried instead of waiting forever.
	connectTimeout = 15 * time.Second
	// pingTimeout bounds the health check of a quiet connection.
	pingTimeout = 5 * time.Second
	// closeTimeout bounds closing the connection, which needs a live
	// context even when the broker's has ended.
	closeTimeout = 5 * time.Second
)

// channels are the notification channels the broker listens on, all on its
// one connection: a batch of either kind then arrives in commit order with
// the others, and one reconnect (one Resync) covers both.
var channels = []string{Channel, ExecutionChannel}

// Broker listens on Postgres with one dedicated connection and fans out to
// subscribers. It is safe for concurrent use. Start it once; once stopped it
// stays stopped.
//
// The connection is taken from the pool and hijacked (pgxpool's
// Conn.Hijack), as River's own notifier does, rather than kept acquired:
//   - LISTEN and the application_name set for operators are session state
//     that must never leak to the pool's other users, and a hijacked
//     connection is closed, never returned;
//   - an acquired connection would make pool.Close block until Stop, and
//     would silently take one connection from the workers' budget; a
//     hijacked one leaves the pool at full strength (the process holds
//     MaxConns+1 connections), and the pool's lifetime and idle limits
//     cannot recycle it under the broker.
//
// It reuses the pool's connection settings (URL, TLS, timeouts) this way.
type Broker struct {
	pool   *pgxpool.Pool
	cfg    Config
	logger *slog.Logger

	ready atomic.Bool

	// lifecycle serializes Start and Stop; Start holds it while it
	// connects, which must not block Subscribe, hence two locks.
	lifecycle sync.Mutex
	cancel    context.CancelFunc // set by a successful Start
	done      chan struct{}      // closed when run has returned

	mu      sync.Mutex
	subs    map[*subscriber]struct{}
	stopped bool
}

// NewBroker returns a Broker that takes its connection from pool. Nothing
// connects until Start. A nil logger discards.
func NewBroker(pool *pgxpool.Pool, cfg Config, logger *slog.Logger) *Broker {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Broker{
		pool:   pool,
		cfg:    cfg.WithDefaults(),
		logger: logger,
		subs:   make(map[*subscriber]struct{}),
	}
}

// Start connects and starts listening, and returns once the LISTEN is in
// place, so every change committed after Start returns reaches subscribers.
// If that first connection fails, Start returns the error and may be called
// again: a broken database at startup is a configuration problem worth
// failing on, while a connection lost later is retried for ever.
//
// The broker runs until Stop or until ctx ends, whichever is first; either
// closes every subscriber's channel. Subscribers that subscribed before
// Start receive a Resync batch, since they could not be told about changes
// made before the broker listened.
func (b *Broker) Start(ctx context.Context) error {
	b.lifecycle.Lock()
	defer b.lifecycle.Unlock()
	if b.cancel != nil {
		return errors.New("start event broker: already started")
	}
	b.mu.Lock()
	stopped := b.stopped
	b.mu.Unlock()
	if stopped {
		return errors.New("start event broker: already stopped")
	}

	conn, err := b.connect(ctx)
	if err != nil {
		return fmt.Errorf("start event broker: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	b.cancel = cancel
	b.done = make(chan struct{})
	b.ready.Store(true)
	b.broadcast(Batch{Resync: true})
	go b.run(runCtx, conn)
	b.logger.Info("event broker listening", "channels", channels)
	return nil
}

// Stop stops listening, closes every subscriber's channel (batches still
// queued for them are dropped) and closes the connection. ctx bounds the
// wait. Stopping a broker that was never started, or twice, is not an
// error.
func (b *Broker) Stop(ctx context.Context) error {
	b.lifecycle.Lock()
	defer b.lifecycle.Unlock()
	if b.cancel == nil {
		b.shutdown()
		return nil
	}
	b.cancel()
	select {
	case <-b.done:
	case <-ctx.Done():
		return fmt.Errorf("stop event broker: %w", context.Cause(ctx))
	}
	b.logger.Info("event broker stopped")
	return nil
}

// Subscribe returns a channel of batches and a cancel func. A subscriber that
// does not keep up is not allowed to block others: when its buffer
// (Config.BufferSize) is full, the batches it misses are merged into one
// with Truncated set instead of blocking, and the subscriber is expected to
// refresh (Batch.NeedsRefresh).
//
// Subscribe first, then read the current state: a change made in between
// then arrives as an event rather than being missed.
//
// Cancel unsubscribes and closes the channel; it returns once the channel
// is closed and may be called more than once. The channel is also closed
// when the broker stops; on a stopped broker it is closed from the start.
func (b *Broker) Subscribe() (<-chan Batch, func()) {
	s := newSubscriber(b.cfg.BufferSize)
	go s.forward()

	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		s.stop()
		return s.out, func() {}
	}
	b.subs[s] = struct{}{}
	b.mu.Unlock()

	return s.out, func() {
		b.mu.Lock()
		delete(b.subs, s)
		b.mu.Unlock()
		s.stop()
	}
}

// Ready reports whether the LISTEN connection is up (for readiness /
// diagnostics). It is false before Start, while reconnecting and after
// Stop.
func (b *Broker) Ready() bool {
	return b.ready.Load()
}

// run serves the broker's life: listen on conn until it breaks, reconnect,
// tell subscribers they may have missed changes, listen again.
func (b *Broker) run(ctx context.Context, conn *pgx.Conn) {
	defer close(b.done)
	defer b.shutdown()
	for {
		connectedAt := time.Now()
		err := b.listen(ctx, conn)
		b.ready.Store(false)
		closeConn(conn)
		if ctx.Err() != nil {
			return
		}
		b.logger.Warn("event broker lost its Postgres connection; reconnecting", "err", err)

		// A connection that dies as soon as it is made (a server
		// refusing work, something killing it) must not be redialled in
		// a tight loop, so it counts as a failed attempt.
		var wait time.Duration
		if time.Since(connectedAt) < b.cfg.ReconnectBackoffMin {
			wait = b.backoff(1)
		}
		for attempt := 1; ; attempt++ {
			if wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
			conn, err = b.connect(ctx)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			wait = b.backoff(attempt)
			b.logger.Warn("event broker could not reconnect to Postgres", "err", err, "attempt", attempt, "retry_in", wait)
		}

		b.ready.Store(true)
		// Changes committed while nobody listened were dropped by
		// Postgres; only a re-read can recover them.
		b.broadcast(Batch{Resync: true})
		b.logger.Info("event broker reconnected to Postgres")
	}
}

// listen delivers the connection's notifications to subscribers until the
// connection fails (the error says how) or ctx ends.
func (b *Broker) listen(ctx context.Context, conn *pgx.Conn) error {
	for {
		waitCtx, cancel := context.WithTimeout(ctx, b.cfg.PingInterval)
		n, err := conn.WaitForNotification(waitCtx)
		cancel()
		switch {
		case err == nil:
			b.deliver(n)
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			// Quiet for PingInterval. A timed-out wait leaves the
			// connection usable (pgx only closes it on other errors).
			pingCtx, cancel := context.WithTimeout(ctx, pingTimeout)
			err := conn.Ping(pingCtx)
			cancel()
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("ping quiet connection: %w", err)
			}
		default:
			return fmt.Errorf("wait for notification: %w", err)
		}
	}
}

// deliver decodes one notification and sends it to every subscriber.
func (b *Broker) deliver(n *pgconn.Notification) {
	batch, err := parseBatch(n.Channel, n.Payload)
	if err != nil {
		// Only a trigger from another version of the schema could send
		// this. The changes it described are lost, so say so.
		b.logger.Warn("event broker dropped an unreadable notification", "err", err, "channel", n.Channel, "payload", n.Payload)
		batch = Batch{Resync: true}
	}
	b.broadcast(batch)
}

// broadcast queues batch for every subscriber; it never blocks on them.
func (b *Broker) broadcast(batch Batch) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		s.push(batch)
	}
}

// shutdown marks the broker stopped and closes every subscriber's channel.
func (b *Broker) shutdown() {
	b.ready.Store(false)
	b.mu.Lock()
	b.stopped = true
	subs := b.subs
	b.subs = make(map[*subscriber]struct{})
	b.mu.Unlock()
	for s := range subs {
		s.stop()
	}
}

// connect returns a connection of its own, named for pg_stat_activity and
// listening on every channel.
func (b *Broker) connect(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	pc, err := b.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire listener connection: %w", err)
	}
	conn := pc.Hijack()
	if _, err := conn.Exec(ctx, "SELECT set_config('application_name', $1, false)", b.cfg.ApplicationName); err != nil {
		closeConn(conn)
		return nil, fmt.Errorf("set listener application_name: %w", err)
	}
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			closeConn(conn)
			return nil, fmt.Errorf("listen on %s: %w", ch, err)
		}
	}
	return conn, nil
}

// backoff is the wait after the attempt-th consecutive failure to connect:
// ReconnectBackoffMin doubled per failure, capped at ReconnectBackoffMax,
// ±20% jitter.
func (b *Broker) backoff(attempt int) time.Duration {
	d := b.cfg.ReconnectBackoffMin
	for i := 1; i < attempt && d < b.cfg.ReconnectBackoffMax; i++ {
		d *= 2
	}
	d = min(d, b.cfg.ReconnectBackoffMax)
	jitter := time.Duration(rand.Int64N(int64(d)/5*2+1)) - d/5
	return d + jitter
}

// closeConn closes a hijacked connection, which the pool no longer closes
// for us, with a fresh deadline: the caller's context may be done.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = conn.Close(ctx)
}
