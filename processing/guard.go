package processing

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

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

// errNotObtained means the lock is held under another token.
var errNotObtained = errors.New("guard lock held by another token")

// The lock is a key whose value is a random token per claim, with a TTL:
// taken with SET NX PX, refreshed and released only by the holder of the
// token (the scripts compare it first), as bsm/redislock does.
var (
	// luaRefresh extends the lock if it is ours, or re-takes it with our
	// token if the key vanished (a Redis restart or flush); 0 means another
	// token holds it.
	luaRefresh = redis.NewScript(`
if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) end
if redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then return 1 end
return 0`)
	// luaRelease deletes the lock if it is ours.
	luaRelease = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)
)

// guard is the per-task Redis lock of the pipeline (step 2). Correctness
// never rests on it alone: Postgres's claim decides who owns a task. Its
// Redis commands go through a pipeliner, so the tasks of a fetched batch
// take (and release) their locks in shared round trips.
type guard struct {
	cfg     GuardConfig
	redis   *pipeliner
	breaker *breaker
	metrics *metrics.Metrics
	logger  *slog.Logger
	// results are the guard_results counters by result, looked up once.
	results map[guardResult]interface{ Inc() }
}

func newGuard(cfg GuardConfig, rdb redis.UniversalClient, m *metrics.Metrics, logger *slog.Logger) *guard {
	g := &guard{cfg: cfg, redis: newPipeliner(rdb, cfg.OpTimeout), metrics: m, logger: logger, results: map[guardResult]interface{ Inc() }{}}
	for _, r := range []guardResult{guardObtained, guardContended, guardUnavailable, guardLost} {
		g.results[r] = m.GuardResults.WithLabelValues(string(r))
	}
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
	key, token := g.key(taskID), newToken()
	err := g.obtain(opCtx, key, token)
	done()
	switch {
	case errors.Is(err, errNotObtained):
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
	l := &lease{g: g, key: key, token: token, cancel: cancel, stop: make(chan struct{}), done: make(chan struct{})}
	go l.refreshLoop(ctx)
	return l, guardObtained
}

// obtain takes key with token: SET NX PX. errNotObtained if someone
// holds it.
func (g *guard) obtain(ctx context.Context, key, token string) error {
	cmd, err := g.redis.do(ctx, &pipeReq{build: func(ctx context.Context, p redis.Pipeliner) redis.Cmder {
		return p.SetNX(ctx, key, token, g.cfg.TTL)
	}})
	if err != nil {
		return err
	}
	ok, err := cmd.(*redis.BoolCmd).Result()
	switch {
	case errors.Is(err, redis.Nil) || (err == nil && !ok):
		return errNotObtained
	case err != nil:
		return err
	}
	return nil
}

func (g *guard) count(r guardResult) { g.results[r].Inc() }

// newToken returns a random lock token (128 bits).
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// lease is a held guard lock, refreshed every TTL/3 until released.
type lease struct {
	g      *guard
	key    string
	token  string
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
		case errors.Is(err, errNotObtained):
			l.lose("held by another token")
			return
		case time.Since(lastOK) >= ttl && l.g.cfg.Mode == GuardStrict:
			l.lose("redis unreachable for longer than the lock ttl")
			return
		default:
			l.g.logger.Warn("redis guard refresh failed", "key", l.key, "err", err)
		}
	}
}

func (l *lease) refresh(ctx context.Context) error {
	if !l.g.breaker.allow() {
		return errors.New("circuit open")
	}
	opCtx, done := context.WithTimeout(ctx, l.g.cfg.OpTimeout)
	defer done()
	// Extends the lock if ours; if gone, re-takes it with our token; if
	// someone else's, 0.
	cmd, err := l.g.redis.script(opCtx, luaRefresh, []string{l.key}, l.token, l.g.cfg.TTL.Milliseconds())
	if err == nil {
		var n int64
		if n, err = cmd.Int64(); err == nil && n == 0 {
			err = errNotObtained
		}
	}
	if err == nil || errors.Is(err, errNotObtained) {
		l.g.breaker.success()
	} else {
		l.g.breaker.failure()
	}
	return err
}

func (l *lease) lose(why string) {
	l.lost = true
	l.g.count(guardLost)
	l.g.logger.Warn("redis guard lock lost; cancelling handler", "key", l.key, "reason", why)
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
	// A lock no longer ours (0) was lost after the last refresh: nothing
	// to delete. On an error the TTL cleans up after us.
	if cmd, err := l.g.redis.script(opCtx, luaRelease, []string{l.key}, l.token); err != nil || cmd.Err() != nil {
		if err == nil {
			err = cmd.Err()
		}
		l.g.logger.Debug("redis guard release failed", "key", l.key, "err", err)
	}
	return false
}
