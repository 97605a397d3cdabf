package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard/switchyard/db"
	"github.com/switchyard/switchyard/handlers"
	"github.com/switchyard/switchyard/jobs"
	"github.com/switchyard/switchyard/migrations"
	"github.com/switchyard/switchyard/workflow"
)

// Config configures a chaos run.
type Config struct {
	// Duration is how long the producer and the faults run; the drain
	// follows.
	Duration time.Duration
	// Pods is the number of worker processes.
	Pods int
	// Rate is the plain tasks enqueued per second; WorkflowRate the
	// workflow executions started per second.
	Rate, WorkflowRate float64
	// Periods are the mean intervals between faults of each kind.
	Periods Periods
	// PGOutage keeps Postgres down this long in each pg-restart fault
	// (stop, wait, start); zero is a plain pg_ctl restart -m fast.
	PGOutage time.Duration
	// PauseFor is how long a pause fault keeps its pod stopped.
	PauseFor time.Duration
	// Schedule is ScheduleRandom or ScheduleFixed.
	Schedule string
	// Seed makes the schedule, the pods killed and the task mix
	// reproducible (timing is not).
	Seed uint64
	// DrainTimeout bounds the wait for every expected task and execution
	// to be final after production stops.
	DrainTimeout time.Duration
	// ExecutorSize is each pod's executor size for chaos.work's queue.
	ExecutorSize int

	// Executable is the switchyard binary the pods run (`serve
	// --chaos-handlers`).
	Executable string
	// Dir holds the suite's services' data, pod logs and the services log.
	Dir string
	// ServicesScript is scripts/chaos-services.sh.
	ServicesScript string
	// PGPort and RedisPort are the suite's own Postgres and Redis ports
	// (never the shared development or test instances).
	PGPort, RedisPort int
	// HTTPPortBase: pod slot i serves /readyz and /metrics on
	// 127.0.0.1:HTTPPortBase+i.
	HTTPPortBase int
	// KeepServices leaves the suite's Postgres and Redis running at the end
	// (to inspect the database); by default they are stopped.
	KeepServices bool

	// Log receives progress lines.
	Log io.Writer
}

// Database is the name of the suite's database, recreated at each run.
const Database = "chaos"

// Report is the result of a run: its settings, what the producer did, and
// the verification.
type Report struct {
	Seed             uint64    `json:"seed"`
	Schedule         string    `json:"schedule"`
	DurationMS       int64     `json:"duration_ms"`
	Pods             int       `json:"pods"`
	Rate             float64   `json:"rate"`
	WorkflowRate     float64   `json:"workflow_rate"`
	KillEveryMS      int64     `json:"kill_every_ms"`
	RedisEveryMS     int64     `json:"redis_restart_every_ms"`
	PGEveryMS        int64     `json:"pg_restart_every_ms"`
	PGOutageMS       int64     `json:"pg_outage_ms"`
	PauseEveryMS     int64     `json:"pause_every_ms"`
	PauseForMS       int64     `json:"pause_for_ms"`
	FaultsPlanned    int       `json:"faults_planned"`
	Started          time.Time `json:"started"`
	DrainMS          int64     `json:"drain_ms"`
	Drained          bool      `json:"drained"`
	TasksEnqueued    int64     `json:"tasks_enqueued"`
	TaskEnqueueErr   int64     `json:"task_enqueue_failures"`
	WorkflowsStarted int64     `json:"workflows_started"`
	WorkflowStartErr int64     `json:"workflow_start_failures"`
	// PodCrashes are pods that exited without being killed or stopped,
	// after they had been ready; PodStartFailures exited before (serve
	// exits when Postgres is unreachable at start-up) and were restarted.
	PodCrashes       []PodExit `json:"pod_crashes"`
	PodStartFailures []PodExit `json:"pod_start_failures"`
	// RescuedTasks and GuardLocksLost are counted in the pods' logs.
	RescuedTasks   int `json:"rescued_tasks"`
	GuardLocksLost int `json:"guard_locks_lost"`
	// DatabaseURL is the suite's database, kept for inspection.
	DatabaseURL string `json:"database_url"`

	*Verification
}

// OK reports whether the run passed.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

type runner struct {
	cfg      Config
	logf     func(string, ...any)
	started  time.Time
	services *services
	dbURL    string
	redisURL string
}

// Run performs a chaos run: start the suite's services, recreate its
// database, start the pods, produce and inject faults for cfg.Duration,
// drain, stop the pods, verify, stop the services. It returns the report
// (check Report.OK) or an error if the run itself could not be carried
// out.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Pods < 1 || cfg.Duration <= 0 || cfg.Executable == "" || cfg.Dir == "" || cfg.ServicesScript == "" {
		return nil, errors.New("chaos: Pods, Duration, Executable, Dir and ServicesScript are required")
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	cfg.Dir = dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	plan, err := Schedule(cfg.Schedule, cfg.Duration, cfg.Periods, cfg.Seed)
	if err != nil {
		return nil, err
	}
	// Pods run a copy of the binary: a rebuild of bin/switchyard during
	// the run must not change what replacement pods run.
	exe, err := copyExecutable(cfg.Executable, filepath.Join(dir, "switchyard"))
	if err != nil {
		return nil, fmt.Errorf("chaos: copy the binary for the pods: %w", err)
	}
	cfg.Executable = exe
	var logMu sync.Mutex
	r := &runner{
		cfg: cfg,
		logf: func(format string, args ...any) {
			logMu.Lock()
			defer logMu.Unlock()
			fmt.Fprintf(cfg.Log, "chaos %s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
		},
		services: &services{
			script:  cfg.ServicesScript,
			logPath: filepath.Join(dir, "services.log"),
			env: []string{
				"SWITCHYARD_CHAOS_DIR=" + dir,
				"SWITCHYARD_CHAOS_PG_PORT=" + strconv.Itoa(cfg.PGPort),
				"SWITCHYARD_CHAOS_REDIS_PORT=" + strconv.Itoa(cfg.RedisPort),
			},
		},
		dbURL:    fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", cfg.PGPort, Database),
		redisURL: fmt.Sprintf("redis://127.0.0.1:%d/0", cfg.RedisPort),
	}
	return r.run(ctx, plan)
}

func (r *runner) run(ctx context.Context, plan []PlannedFault) (*Report, error) {
	cfg := r.cfg
	rep := &Report{
		Seed: cfg.Seed, Schedule: cfg.Schedule, DurationMS: cfg.Duration.Milliseconds(), Pods: cfg.Pods,
		Rate: cfg.Rate, WorkflowRate: cfg.WorkflowRate, KillEveryMS: cfg.Periods.Kill.Milliseconds(),
		RedisEveryMS: cfg.Periods.RedisRestart.Milliseconds(), PGEveryMS: cfg.Periods.PGRestart.Milliseconds(),
		PGOutageMS: cfg.PGOutage.Milliseconds(), PauseEveryMS: cfg.Periods.Pause.Milliseconds(), PauseForMS: cfg.PauseFor.Milliseconds(),
		FaultsPlanned: len(plan), DatabaseURL: r.dbURL,
	}
	killLeftovers(cfg.Dir)
	// Pod ids repeat from run to run: start with no old pod logs.
	if err := os.RemoveAll(filepath.Join(cfg.Dir, "pods")); err != nil {
		return nil, err
	}
	r.logf("starting the suite's Postgres (port %d) and Redis (port %d) in %s", cfg.PGPort, cfg.RedisPort, cfg.Dir)
	if err := r.services.run(ctx, "start"); err != nil {
		return nil, err
	}
	if !cfg.KeepServices {
		defer func() {
			if err := r.services.run(context.WithoutCancel(ctx), "stop"); err != nil {
				r.logf("stop services: %v", err)
			}
		}()
	}
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	pool, err := db.NewPool(ctx, db.PoolConfig{URL: r.dbURL, MaxConns: 10, ConnectTimeout: 2 * time.Second})
	if err != nil {
		return nil, err
	}
	defer pool.Close()

	ps := newPods(podConfig{
		exe: cfg.Executable, dir: cfg.Dir, databaseURL: r.dbURL, redisURL: r.redisURL,
		portBase: cfg.HTTPPortBase, executorSize: cfg.ExecutorSize,
	}, cfg.Pods, r.logf)
	defer ps.stopAll() // on early returns; a no-op after the explicit stop
	if err := ps.ensureAll(ctx); err != nil {
		return nil, fmt.Errorf("chaos: start pods: %w", err)
	}
	r.logf("%d pods ready; producing %.0f tasks/s and %.1f workflows/s for %s with %d faults planned (%s schedule, seed %d)",
		cfg.Pods, cfg.Rate, cfg.WorkflowRate, cfg.Duration, len(plan), cfg.Schedule, cfg.Seed)

	var planText []string
	for _, pf := range plan {
		planText = append(planText, fmt.Sprintf("%s@%s", pf.Kind, pf.At.Round(100*time.Millisecond)))
	}
	r.logf("fault plan: %s", strings.Join(planText, " "))

	registry := jobs.NewRegistry()
	if err := handlers.RegisterBuiltins(registry, handlers.NewMux(), handlers.BuiltinConfig{}); err != nil {
		return nil, err
	}
	if err := RegisterTypes(registry); err != nil {
		return nil, err
	}
	client, err := jobs.NewInsertOnlyClient(pool, registry)
	if err != nil {
		return nil, err
	}
	engine, err := workflow.New(workflow.Config{}, workflow.Deps{Pool: pool, Jobs: client})
	if err != nil {
		return nil, err
	}
	prod := &producer{pool: pool, jobs: client, engine: engine}
	in := &injector{pods: ps, services: r.services, pool: pool, redisURL: r.redisURL, pgOutage: cfg.PGOutage, pauseFor: cfg.PauseFor,
		rng: rand.New(rand.NewPCG(cfg.Seed, 4)), logf: r.logf}

	// Production and faults.
	r.started = time.Now()
	rep.Started = r.started
	phaseCtx, stopPhase := context.WithTimeout(ctx, cfg.Duration)
	defer stopPhase()
	var (
		wg     sync.WaitGroup
		faults []Fault
	)
	wg.Add(3)
	go func() { defer wg.Done(); prod.run(phaseCtx, cfg.Rate, cfg.WorkflowRate, cfg.Seed) }()
	go func() { defer wg.Done(); faults = r.injectAll(phaseCtx, in, plan) }()
	go func() { defer wg.Done(); r.progress(phaseCtx, pool, prod, ps, nil) }()
	wg.Wait()
	productionEnd := time.Now()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("chaos: interrupted: %w", err)
	}
	rep.TasksEnqueued, rep.TaskEnqueueErr = prod.stats.tasks.Load(), prod.stats.taskErrors.Load()
	rep.WorkflowsStarted, rep.WorkflowStartErr = prod.stats.workflows.Load(), prod.stats.workflowErrors.Load()
	r.logf("production over: %d tasks and %d workflows enqueued (%d and %d enqueues failed during faults); %d faults injected",
		rep.TasksEnqueued, rep.WorkflowsStarted, rep.TaskEnqueueErr, rep.WorkflowStartErr, len(faults))

	// Drain: every slot runs a pod, and they work until all that is
	// expected is final.
	if err := ps.ensureAll(ctx); err != nil {
		return nil, fmt.Errorf("chaos: pods before the drain: %w", err)
	}
	drainStart := time.Now()
	rep.Drained = r.drain(ctx, pool, prod, ps)
	rep.DrainMS = time.Since(drainStart).Milliseconds()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("chaos: interrupted: %w", err)
	}

	// Stop the pods first, so the verifier reads a database nobody
	// changes any more.
	r.logf("stopping pods")
	ps.stopAll()
	rep.PodCrashes, rep.PodStartFailures = ps.exited()
	rep.RescuedTasks, rep.GuardLocksLost = countLogLines(filepath.Join(cfg.Dir, "pods"))

	verifyCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	if err := retry(verifyCtx, func(ctx context.Context) error { return recordFaults(ctx, pool, faults) }); err != nil {
		return nil, fmt.Errorf("chaos: record faults: %w", err)
	}
	r.logf("verifying")
	var v *Verification
	if err := retry(verifyCtx, func(ctx context.Context) error {
		var err error
		v, err = Verify(ctx, pool, VerifyOptions{ProductionEnd: productionEnd})
		return err
	}); err != nil {
		return nil, err
	}
	rep.Verification = v
	r.addRunProblems(rep)
	return rep, nil
}

// prepare recreates the suite's database, migrates it, creates the suite's
// tables and empties Redis.
func (r *runner) prepare(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	adminURL := strings.Replace(r.dbURL, "/"+Database+"?", "/postgres?", 1)
	err := retry(ctx, func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+Database+" WITH (FORCE)"); err != nil {
			return err
		}
		_, err = conn.Exec(ctx, "CREATE DATABASE "+Database)
		return err
	})
	if err != nil {
		return fmt.Errorf("chaos: recreate database: %w", err)
	}
	mig, err := migrations.New(r.dbURL)
	if err != nil {
		return err
	}
	defer mig.Close()
	if err := mig.Up(ctx); err != nil {
		return fmt.Errorf("chaos: migrate: %w", err)
	}
	conn, err := pgx.Connect(ctx, r.dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if err := CreateTables(ctx, conn); err != nil {
		return err
	}
	opts, err := redis.ParseURL(r.redisURL)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return fmt.Errorf("chaos: flush redis: %w", err)
	}
	return nil
}

// injectAll carries out the plan, one fault at a time, until ctx ends; a
// fault in progress is finished (a restart is never left half-done).
func (r *runner) injectAll(ctx context.Context, in *injector, plan []PlannedFault) []Fault {
	var faults []Fault
	for _, pf := range plan {
		select {
		case <-ctx.Done():
			return faults
		case <-time.After(time.Until(r.started.Add(pf.At))):
		}
		f := in.inject(ctx, pf.Kind)
		faults = append(faults, f)
		r.logf("fault %d/%d at %s: %s", len(faults), len(plan), time.Since(r.started).Round(time.Second), f.describe())
	}
	return faults
}

// progress logs a status line every 10s until ctx ends.
func (r *runner) progress(ctx context.Context, pool *pgxpool.Pool, prod *producer, ps *pods, pending func(context.Context) string) {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var done int64
		doneText := "?"
		if err := pool.QueryRow(qctx, `SELECT count(*) FROM chaos_ledger WHERE outcome = 'done'`).Scan(&done); err == nil {
			doneText = strconv.FormatInt(done, 10)
		}
		extra := ""
		if pending != nil {
			extra = "; " + pending(qctx)
		}
		cancel()
		r.logf("t=%s enqueued %d tasks (%d failed), %d workflows (%d failed); %s effects applied; %d pods live%s",
			time.Since(r.started).Round(time.Second), prod.stats.tasks.Load(), prod.stats.taskErrors.Load(),
			prod.stats.workflows.Load(), prod.stats.workflowErrors.Load(), doneText, len(ps.live()), extra)
	}
}

const pendingSQL = `
SELECT (SELECT count(*) FROM chaos_expected x JOIN river_job j ON j.id = x.task_id
        WHERE x.kind = 'task' AND j.state NOT IN ('completed', 'discarded', 'cancelled')),
       (SELECT count(*) FROM chaos_expected x JOIN switchyard_execution e ON e.id = x.execution_id
        WHERE x.kind = 'workflow' AND e.status NOT IN ('completed', 'failed', 'cancelled', 'timed_out'))`

// drain waits until no expected task or execution is unfinished, or
// DrainTimeout passes, and reports whether everything finished.
func (r *runner) drain(ctx context.Context, pool *pgxpool.Pool, prod *producer, ps *pods) bool {
	r.logf("draining: waiting up to %s for every expected task and execution to be final", r.cfg.DrainTimeout)
	drainCtx, cancel := context.WithTimeout(ctx, r.cfg.DrainTimeout)
	defer cancel()
	var tasks, execs int64
	pending := func(ctx context.Context) string {
		return fmt.Sprintf("pending: %d tasks, %d executions", tasks, execs)
	}
	progCtx, stopProg := context.WithCancel(drainCtx)
	defer stopProg()
	go r.progress(progCtx, pool, prod, ps, pending)
	for {
		qctx, qcancel := context.WithTimeout(drainCtx, 5*time.Second)
		err := pool.QueryRow(qctx, pendingSQL).Scan(&tasks, &execs)
		qcancel()
		if err == nil && tasks == 0 && execs == 0 {
			r.logf("drained: everything expected is final")
			return true
		}
		select {
		case <-drainCtx.Done():
			r.logf("drain deadline: %d tasks and %d executions still not final", tasks, execs)
			return false
		case <-time.After(time.Second):
		}
	}
}

// retry calls fn until it succeeds or ctx ends, with backoff: the suite's
// own work must survive a Postgres restart too.
func retry(ctx context.Context, fn func(context.Context) error) error {
	backoff := 100 * time.Millisecond
	for {
		callCtx, cancel := context.WithTimeout(ctx, time.Minute)
		err := fn(callCtx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// addRunProblems adds the run's own failures to the verification's.
func (r *runner) addRunProblems(rep *Report) {
	if !rep.Drained {
		rep.Problems = append(rep.Problems, fmt.Sprintf("not everything expected was final %s after production stopped", r.cfg.DrainTimeout))
	}
	if n := len(rep.PodCrashes); n > 0 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%d pods exited on their own (crashed)", n))
	}
	failed := 0
	for _, f := range rep.Faults {
		if f.Error != "" {
			failed++
		}
	}
	if failed > 0 {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%d faults could not be injected", failed))
	}
	for _, kind := range FaultKinds {
		if r.cfg.Periods.of(kind) > 0 && r.cfg.Periods.of(kind) <= r.cfg.Duration && rep.FaultCounts[kind] == 0 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("no %s fault was injected", kind))
		}
	}
}

// countLogLines counts, in the pods' JSON logs, the tasks rescued from dead
// pods and the guard locks lost.
func countLogLines(dir string) (rescued, lost int) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.Contains(line, `"msg":"rescued task of a dead pod"`):
				rescued++
			case strings.Contains(line, `"msg":"redis guard lock lost; cancelling handler"`):
				lost++
			}
		}
		f.Close()
	}
	return rescued, lost
}

// copyExecutable copies the binary at src to dst (replacing it) and
// returns dst.
func copyExecutable(src, dst string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return "", err
	}
	if err := out.Close(); err != nil {
		return "", err
	}
	return dst, os.Rename(tmp, dst)
}
