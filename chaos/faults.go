package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// Schedule modes.
const (
	// ScheduleRandom draws each kind's intervals uniformly from 0.5 to 1.5
	// times its period.
	ScheduleRandom = "random"
	// ScheduleFixed places each kind at exactly its period, staggered so
	// that no two faults are closer than minFaultGap: every kind whose
	// period fits in the run fires at least once.
	ScheduleFixed = "fixed"
)

const (
	// minFaultGap separates faults of the fixed schedule.
	minFaultGap = 4 * time.Second
	// quietEnd is the end of the production phase in which no fault
	// starts, so the last fault's recovery is still under load.
	quietEnd = 5 * time.Second
)

// PlannedFault is one fault of the schedule, at an offset from the start
// of production.
type PlannedFault struct {
	At   time.Duration
	Kind string
}

// Periods are the mean intervals of each fault kind; zero disables a kind.
type Periods struct {
	Kill, RedisRestart, PGRestart, Pause time.Duration
}

func (p Periods) of(kind string) time.Duration {
	switch kind {
	case FaultKill:
		return p.Kill
	case FaultRedisRestart:
		return p.RedisRestart
	case FaultPGRestart:
		return p.PGRestart
	case FaultPause:
		return p.Pause
	}
	return 0
}

// Schedule plans the faults of a run of the given duration. The fixed
// schedule puts kind number i (kill, redis-restart, pg-restart) first at
// half its period plus i·minFaultGap, then every period, and pushes a
// fault later when it would come within minFaultGap of the previous one.
// The random one is seeded. Faults that would start in the last quietEnd
// of the run are dropped, except that the fixed schedule keeps the first
// fault of each kind whose period fits in the run (moved earlier if
// needed), so a short run still sees every kind.
func Schedule(mode string, duration time.Duration, periods Periods, seed uint64) ([]PlannedFault, error) {
	end := duration - quietEnd
	var plan []PlannedFault
	switch mode {
	case ScheduleFixed:
		for i, kind := range FaultKinds {
			period := periods.of(kind)
			if period <= 0 {
				continue
			}
			for at := period/2 + time.Duration(i)*minFaultGap; at < duration; at += period {
				plan = append(plan, PlannedFault{At: at, Kind: kind})
			}
		}
		sort.SliceStable(plan, func(i, j int) bool { return plan[i].At < plan[j].At })
		for i := 1; i < len(plan); i++ {
			if plan[i].At < plan[i-1].At+minFaultGap {
				plan[i].At = plan[i-1].At + minFaultGap
			}
		}
		kept := plan[:0]
		seen := map[string]bool{}
		for _, f := range plan {
			if f.At <= end || (!seen[f.Kind] && periods.of(f.Kind) <= duration) {
				kept = append(kept, f)
				seen[f.Kind] = true
			}
		}
		plan = kept
		// A first fault kept past the end moves into the run, behind the
		// previous one.
		for i := range plan {
			if plan[i].At > end {
				plan[i].At = max(end, time.Duration(0))
				if i > 0 && plan[i].At < plan[i-1].At+minFaultGap {
					plan[i].At = plan[i-1].At + minFaultGap
				}
			}
		}
	case ScheduleRandom:
		rng := rand.New(rand.NewPCG(seed, 3))
		for _, kind := range FaultKinds {
			period := periods.of(kind)
			if period <= 0 {
				continue
			}
			draw := func() time.Duration { return time.Duration((0.5 + rng.Float64()) * float64(period)) }
			for at := draw(); at <= end; at += draw() {
				plan = append(plan, PlannedFault{At: at, Kind: kind})
			}
		}
		sort.SliceStable(plan, func(i, j int) bool { return plan[i].At < plan[j].At })
	default:
		return nil, fmt.Errorf("unknown schedule %q (valid: %s, %s)", mode, ScheduleRandom, ScheduleFixed)
	}
	return plan, nil
}

// Fault is an injected fault as the suite recorded it.
type Fault struct {
	Kind      string
	Target    string // the killed pod's id
	StartedAt time.Time
	EndedAt   time.Time
	Err       string
	// Claims are, for a kill, the tasks the pod had claimed when it died.
	Claims []claim
}

type claim struct {
	TaskID  int64
	Attempt int
}

// services runs scripts/chaos-services.sh.
type services struct {
	script  string
	env     []string
	logPath string
}

func (s *services) run(ctx context.Context, command string, args ...string) error {
	logFile, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "--- %s %s %v\n", time.Now().Format(time.RFC3339Nano), command, args)
	cmd := exec.CommandContext(ctx, "bash", append([]string{s.script, command}, args...)...)
	cmd.Env = append(podEnv(), s.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w (see %s)", s.script, command, err, s.logPath)
	}
	return nil
}

// injector carries out the faults of the schedule.
type injector struct {
	pods     *pods
	services *services
	pool     *pgxpool.Pool
	redisURL string
	pgOutage time.Duration
	pauseFor time.Duration
	rng      *rand.Rand
	logf     func(string, ...any)
}

// runningClaimsSQL lists the chaos.work tasks a pod has claimed and not
// finished (River appends the claiming client's id to attempted_by); the
// engine's control tasks have no ledger to measure them by.
const runningClaimsSQL = `
SELECT id, attempt FROM river_job
WHERE state = 'running' AND kind = 'chaos.work' AND attempted_by[array_length(attempted_by, 1)] = $1`

func (in *injector) inject(ctx context.Context, kind string) Fault {
	f := Fault{Kind: kind}
	var err error
	switch kind {
	case FaultKill:
		err = in.kill(ctx, &f)
	case FaultRedisRestart:
		f.StartedAt = time.Now()
		if err = in.services.run(context.WithoutCancel(ctx), "restart-redis"); err == nil {
			err = in.waitRedis(ctx)
		}
		f.EndedAt = time.Now()
	case FaultPause:
		err = in.pause(&f)
	case FaultPGRestart:
		f.StartedAt = time.Now()
		down := strconv.FormatFloat(in.pgOutage.Seconds(), 'f', 3, 64)
		if err = in.services.run(context.WithoutCancel(ctx), "restart-pg", down); err == nil {
			err = in.waitPostgres(ctx)
		}
		f.EndedAt = time.Now()
	}
	if err != nil {
		f.Err = err.Error()
	}
	return f
}

// kill SIGKILLs a random pod, records the tasks it had claimed, and starts
// a replacement in its slot.
func (in *injector) kill(ctx context.Context, f *Fault) error {
	p, at, err := in.pods.kill(in.rng)
	f.StartedAt, f.EndedAt = at, time.Now()
	if p != nil {
		f.Target = p.id
	}
	if err != nil {
		return err
	}
	// The dead pod changes nothing any more, once the statements it had
	// already sent (a batch of completions) have run: give them a moment.
	// A rescuer acts only after RescueAfter (3s), so look well before,
	// retrying briefly if Postgres is down (the ledger covers what this
	// misses).
	time.Sleep(200 * time.Millisecond)
	for try := 0; try < 10; try++ {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		rows, qerr := in.pool.Query(qctx, runningClaimsSQL, p.id)
		if qerr == nil {
			f.Claims, qerr = pgx.CollectRows(rows, func(r pgx.CollectableRow) (claim, error) {
				var c claim
				return c, r.Scan(&c.TaskID, &c.Attempt)
			})
		}
		cancel()
		if qerr == nil || ctx.Err() != nil {
			break
		}
		f.Claims = nil
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := in.pods.start(p.slot); err != nil {
		return fmt.Errorf("start replacement for %s: %w", p.id, err)
	}
	return nil
}

// pause freezes a random pod (SIGSTOP) for pauseFor and lets it go on
// (SIGCONT): a stalled process (a long GC pause, a frozen VM) that the
// others take for dead and that then resumes with stale claims.
func (in *injector) pause(f *Fault) error {
	live := in.pods.live()
	if len(live) == 0 {
		return errors.New("no live pod to pause")
	}
	p := live[in.rng.IntN(len(live))]
	f.Target, f.StartedAt = p.id, time.Now()
	defer func() { f.EndedAt = time.Now() }()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pause pod %s: %w", p.id, err)
	}
	time.Sleep(in.pauseFor)
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("resume pod %s: %w", p.id, err)
	}
	return nil
}

func (in *injector) waitRedis(ctx context.Context) error {
	opts, err := redis.ParseURL(in.redisURL)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	return poll(ctx, 60*time.Second, func(ctx context.Context) error { return rdb.Ping(ctx).Err() })
}

func (in *injector) waitPostgres(ctx context.Context) error {
	return poll(ctx, 60*time.Second, func(ctx context.Context) error {
		conn, err := pgx.ConnectConfig(ctx, in.pool.Config().ConnConfig.Copy())
		if err != nil {
			return err
		}
		return conn.Close(ctx)
	})
}

// poll calls fn every 50ms until it succeeds or timeout passes.
func poll(ctx context.Context, timeout time.Duration, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	for {
		callCtx, callCancel := context.WithTimeout(ctx, time.Second)
		err := fn(callCtx)
		callCancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not back after %s: %w", timeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// recordFaults writes the faults (and the kills' claims) to chaos_fault and
// chaos_fault_task, for the verifier.
func recordFaults(ctx context.Context, pool *pgxpool.Pool, faults []Fault) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, f := range faults {
			var errText *string
			if f.Err != "" {
				errText = &f.Err
			}
			var id int64
			if err := tx.QueryRow(ctx, `INSERT INTO chaos_fault (kind, target, started_at, ended_at, error) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
				f.Kind, f.Target, f.StartedAt, f.EndedAt, errText).Scan(&id); err != nil {
				return err
			}
			for _, c := range f.Claims {
				if _, err := tx.Exec(ctx, `INSERT INTO chaos_fault_task (fault_id, task_id, attempt) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
					id, c.TaskID, c.Attempt); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// describe is a short label of a fault for progress lines.
func (f Fault) describe() string {
	s := f.Kind
	if f.Target != "" {
		s += " " + f.Target
	}
	switch f.Kind {
	case FaultKill:
		s += " (" + strconv.Itoa(len(f.Claims)) + " tasks in progress)"
	default:
		s += fmt.Sprintf(" (back after %s)", f.EndedAt.Sub(f.StartedAt).Round(time.Millisecond))
	}
	if f.Err != "" {
		s += ": FAILED: " + f.Err
	}
	return s
}
