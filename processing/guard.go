package processing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/bsm/redislock"

	"github.com/switchyard/switchyard/metrics"
)

// GuardMode says what a worker does when Redis cannot be reached.
type GuardMode string

// Guard modes.
const (
	// GuardBestEffort runs the task unguarded and counts it. Postgres's
	// claim already makes one worker the owner; the guard only adds a
	// second line against a zombie run of the same task.
	GuardBestEffort GuardMode = "best-effort"
	// GuardStrict snoozes the task until Redis is back: no task runs
	// without the lock.
	GuardStrict GuardMode = "strict"
	// GuardOff never touches Redis (benchmarks, single-pod setups).
	GuardOff GuardMode = "off"
)

// ParseGuardMode returns the mode named s.
func ParseGuardMode(s string) (GuardMode, error) {
	switch m := GuardMode(s); m {
	case GuardBestEffort, GuardStrict, GuardOff:
		return m, nil
	}
	return "", fmt.Errorf("unknown guard mode %q (valid: best-effort, strict, off)", s)
}

// errLockLost is the cancellation cause of a handler whose guard lock was
// taken by someone else.
var errLockLost = errors.New("guard lock lost")

// guardResult is the outcome of acquiring the guard for one task.
type guardResult string

const (
	guardObtained    guardResult = "obtained"    // lock held; run
	guardContended   guardResult = "contended"   // someone else holds it; snooze
	guardUnavailable guardResult = "unavailable" // Redis unreachable (or breaker open)
	guardLost        guardResult = "lost"        // a held lock was taken away
)

// guard is the per-task Redis lock of the pipeline (step 2). Correctness
// never rests on it alone: Postgres's claim decides who owns a task.
type guard struct {
	cfg     GuardConfig
	locker  *redislock.Client
	breaker *breaker
	metrics *metrics.Metrics
	logger  *slog.Logger
}

func newGuard(cfg GuardConfig, locker *redislock.Client, m *metrics.Metrics, logger *slog.Logger) *guard {
	g := &guard{cfg: cfg, locker: locker, metrics: m, logger: logger}
	g.breaker = newBreaker(cfg.BreakerThreshold, cfg.BreakerCooldown, func(open bool) {
		if open {
			m.GuardCircuitOpen.Set(1)
			logger.Warn("redis guard circuit opened; skipping redis", "cooldown", cfg.BreakerCooldown, "mode", cfg.Mode)
		} else {
			m.GuardCircuitOpen.Set(0)
			logger.Info("redis guard circuit closed")
		}
	})
	return g
}

func (g *guard) key(taskID int64) string {
	return g.cfg.KeyPrefix + "task:" + strconv.FormatInt(taskID, 10)
}

// acquire takes the lock of a task. On guardObtained the returned lease
// must be released; cancel is called with errLockLost if the lock is lost
// while the handler runs.
func (g *guard) acquire(ctx context.Context, taskID int64, cancel context.CancelCauseFunc) (*lease, guardResult) {
	if !g.breaker.allow() {
		g.count(guardUnavailable)
		return nil, guardUnavailable
	}
	opCtx, done := context.WithTimeout(ctx, g.cfg.OpTimeout)
	lock, err := g.locker.Obtain(opCtx, g.key(taskID), g.cfg.TTL, nil)
	done()
	switch {
	case errors.Is(err, redislock.ErrNotObtained):
		g.breaker.success()
		g.count(guardContended)
		return nil, guardContended
	case err != nil:
		g.breaker.failure()
		g.count(guardUnavailable)
		g.logger.Debug("redis guard unavailable", "task_id", taskID, "err", err)
		return nil, guardUnavailable
	}
	g.breaker.success()
	g.count(guardObtained)
	l := &lease{g: g, lock: lock, cancel: cancel, stop: make(chan struct{}), done: make(chan struct{})}
	go l.refreshLoop(ctx)
	return l, guardObtained
}

func (g *guard) count(r guardResult) { g.metrics.GuardResults.WithLabelValues(string(r)).Inc() }

// lease is a held guard lock, refreshed every TTL/3 until released.
type lease struct {
	g      *guard
	lock   *redislock.Lock
	cancel context.CancelCauseFunc

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
	lost     bool // written by refreshLoop before done closes
}

// refreshLoop extends the lock. If the key vanished (a Redis restart or
// flush), it re-takes it with the same token; only a key held under another
// token means someone else runs the task, and then the handler is
// cancelled. When Redis is unreachable for longer than the TTL, the lock
// has expired: strict mode treats that as lost, best-effort keeps running.
func (l *lease) refreshLoop(ctx context.Context) {
	defer close(l.done)
	ttl := l.g.cfg.TTL
	ticker := time.NewTicker(ttl / 3)
	defer ticker.Stop()
	lastOK := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.stop:
			return
		case <-ticker.C:
		}
		err := l.refresh(ctx)
		switch {
		case err == nil:
			lastOK = time.Now()
			continue
		case errors.Is(err, redislock.ErrNotObtained):
			l.lose("held by another token")
			return
		case time.Since(lastOK) >= ttl && l.g.cfg.Mode == GuardStrict:
			l.lose("redis unreachable for longer than the lock ttl")
			return
		default:
			l.g.logger.Warn("redis guard refresh failed", "key", l.lock.Key(), "err", err)
		}
	}
}

func (l *lease) refresh(ctx context.Context) error {
	if !l.g.breaker.allow() {
		return errors.New("circuit open")
	}
	opCtx, done := context.WithTimeout(ctx, l.g.cfg.OpTimeout)
	defer done()
	err := l.lock.Refresh(opCtx, l.g.cfg.TTL, nil)
	if errors.Is(err, redislock.ErrNotObtained) {
		// Gone or someone else's: re-obtaining with our token succeeds
		// only if the key is absent (or already ours).
		_, err = l.g.locker.Obtain(opCtx, l.lock.Key(), l.g.cfg.TTL, &redislock.Options{Token: l.lock.Token()})
	}
	if err == nil || errors.Is(err, redislock.ErrNotObtained) {
		l.g.breaker.success()
	} else {
		l.g.breaker.failure()
	}
	return err
}

func (l *lease) lose(why string) {
	l.lost = true
	l.g.count(guardLost)
	l.g.logger.Warn("redis guard lock lost; cancelling handler", "key", l.lock.Key(), "reason", why)
	l.cancel(errLockLost)
}

// release stops refreshing and deletes the lock if it is still ours (the
// token-checked compare-and-delete of redislock). It reports whether the
// lock was lost while held.
func (l *lease) release(ctx context.Context) (lost bool) {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
	if l.lost {
		return true
	}
	opCtx, done := context.WithTimeout(context.WithoutCancel(ctx), l.g.cfg.OpTimeout)
	defer done()
	if err := l.lock.Release(opCtx); err != nil && !errors.Is(err, redislock.ErrLockNotHeld) {
		// The TTL cleans up after us.
		l.g.logger.Debug("redis guard release failed", "key", l.lock.Key(), "err", err)
	}
	return false
}
