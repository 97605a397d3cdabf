package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/switchyard/switchyard/handlers"
	"github.com/switchyard/switchyard/jobs"
	"github.com/switchyard/switchyard/metrics"
	"github.com/switchyard/switchyard/processing"
)

// The queue configuration every throughput-style measurement shares, the
// same for River and for Switchyard: one queue of executor size 500 with a
// 5ms fetch cooldown (Switchyard's default), and a pool of 50 connections.
// With these, raw River is bound by CPU, not by the fetch cadence: at
// executor size 100 and a 20ms cooldown every variant runs at the
// configuration's cap of 5,000 tasks/s, and the ratios say nothing.
const (
	benchQueue        = "bench"
	benchWorkers      = 500
	benchCooldown     = 5 * time.Millisecond
	benchPollInterval = processing.DefaultFetchPollInterval
	benchPoolSize     = 50
	insertBatch       = 5000
)

// queueParams records the shared queue configuration in a scenario's
// params.
func queueParams(p map[string]any) {
	p["queue_executor_size"] = benchWorkers
	p["fetch_cooldown"] = benchCooldown.String()
	p["fetch_poll_interval"] = benchPollInterval.String()
	p["db_pool_size"] = benchPoolSize
}

// noopArgs is the River side of a no-op task: kind "noop", arguments {}.
// Switchyard's noop handler works the same rows.
type noopArgs struct{}

func (noopArgs) Kind() string { return handlers.NoopArgs{}.TaskType() }

// rawNoopWorker is a plain River worker that counts its jobs.
type rawNoopWorker struct {
	river.WorkerDefaults[noopArgs]
	done *atomic.Int64
}

func (w *rawNoopWorker) Work(context.Context, *river.Job[noopArgs]) error {
	w.done.Add(1)
	return nil
}

// switchyardMeta is the metadata jobs.Client writes for a task without
// options.
var switchyardMeta = []byte(`{"switchyard":{}}`)

// insertNoops inserts n no-op tasks into queue with River's COPY-based
// InsertManyFast, in batches, before any worker starts.
func insertNoops(ctx context.Context, pool *pgxpool.Pool, queue string, n int, meta []byte, progress func(done int)) error {
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		return err
	}
	params := make([]river.InsertManyParams, 0, insertBatch)
	for done := 0; done < n; {
		params = params[:0]
		for range min(insertBatch, n-done) {
			params = append(params, river.InsertManyParams{Args: noopArgs{}, InsertOpts: &river.InsertOpts{Queue: queue, Metadata: meta}})
		}
		k, err := rc.InsertManyFast(ctx, params)
		if err != nil {
			return fmt.Errorf("insert tasks: %w", err)
		}
		done += k
		if progress != nil {
			progress(done)
		}
	}
	return nil
}

// worker is something that works a queue: a River client or a Switchyard
// processing service.
type worker interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// newRawRiver returns a plain River client working queue with a counting
// no-op worker.
func (r *runner) newRawRiver(pool *pgxpool.Pool, queue string, done *atomic.Int64) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, &rawNoopWorker{done: done})
	return river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{queue: {MaxWorkers: benchWorkers}},
		Workers:           workers,
		FetchCooldown:     benchCooldown,
		FetchPollInterval: benchPollInterval,
		Logger:            r.logger(),
	})
}

// newSwitchyard returns a processing service working queue with a counting
// no-op handler, the guard in mode (metrics are always on).
func (r *runner) newSwitchyard(pool *pgxpool.Pool, queue string, mode processing.GuardMode, done *atomic.Int64) (*processing.Service, error) {
	reg := jobs.NewRegistry()
	if err := jobs.Register[handlers.NoopArgs](reg, jobs.TypeConfig{Queue: queue}); err != nil {
		return nil, err
	}
	mux := handlers.NewMux()
	mux.HandleFunc(handlers.NoopArgs{}.TaskType(), func(context.Context, *jobs.Task) (any, error) {
		done.Add(1)
		return nil, nil
	})
	m, err := metrics.New(prometheus.NewRegistry(), "bench")
	if err != nil {
		return nil, err
	}
	return processing.New(processing.Config{
		Queues:            map[string]int{queue: benchWorkers},
		FetchCooldown:     benchCooldown,
		FetchPollInterval: benchPollInterval,
		ShutdownTimeout:   5 * time.Second,
		Guard:             processing.GuardConfig{Mode: mode, KeyPrefix: r.keyPrefix},
	}, processing.Deps{Pool: pool, Redis: r.rdb, Registry: reg, Handlers: mux, Metrics: m, Logger: r.logger()})
}

// workAll starts w and waits until n tasks are completed in the database,
// returning the time from start to the last completion being visible and
// the CPU used meanwhile.
func (r *runner) workAll(ctx context.Context, label string, pool *pgxpool.Pool, w worker, done *atomic.Int64, n int) (time.Duration, cpuUsage, error) {
	before, err := r.cpuSnapshot(ctx, pool)
	if err != nil {
		return 0, cpuUsage{}, err
	}
	start := time.Now()
	if err := w.Start(ctx); err != nil {
		return 0, cpuUsage{}, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := w.Stop(sctx); err != nil {
			r.logf("%s: stop: %v", label, err)
		}
	}()
	stop := r.ticker(ctx, 2*time.Second, func() {
		d := done.Load()
		r.logf("%s: %d/%d worked (%.0f/s)", label, d, n, float64(d)/time.Since(start).Seconds())
	})
	defer stop()
	timeout := 60*time.Second + time.Duration(n)*time.Millisecond
	// The handlers' count first (cheap), then the database: River writes
	// completions in batches, and they count only once written.
	err = waitFor(ctx, timeout, 5*time.Millisecond, func() (bool, error) { return done.Load() >= int64(n), nil })
	if err != nil {
		return 0, cpuUsage{}, fmt.Errorf("%s: %d of %d tasks worked: %w", label, done.Load(), n, err)
	}
	err = waitFor(ctx, timeout, 5*time.Millisecond, func() (bool, error) {
		var open bool
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM river_job WHERE state IN ('available', 'running'))`).Scan(&open)
		return !open, err
	})
	elapsed := time.Since(start)
	if err != nil {
		return 0, cpuUsage{}, fmt.Errorf("%s: waiting for completions: %w", label, err)
	}
	after, err := r.cpuSnapshot(ctx, pool)
	if err != nil {
		return 0, cpuUsage{}, err
	}
	var completed int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`).Scan(&completed); err != nil {
		return 0, cpuUsage{}, err
	}
	if completed != n {
		return 0, cpuUsage{}, fmt.Errorf("%s: %d of %d tasks completed", label, completed, n)
	}
	return elapsed, after.since(before), nil
}

// throughputVariant is one way of working the same no-op tasks.
type throughputVariant struct {
	id, label string
	schema    schema
	meta      []byte
	build     func(pool *pgxpool.Pool, done *atomic.Int64) (worker, error)
}

func (r *runner) throughput(ctx context.Context, params map[string]any) ([]Figure, error) {
	n := r.sizes.ThroughputTasks
	params["tasks"] = n
	queueParams(params)
	raw := func(pool *pgxpool.Pool, done *atomic.Int64) (worker, error) {
		return r.newRawRiver(pool, benchQueue, done)
	}
	sy := func(mode processing.GuardMode) func(*pgxpool.Pool, *atomic.Int64) (worker, error) {
		return func(pool *pgxpool.Pool, done *atomic.Int64) (worker, error) {
			return r.newSwitchyard(pool, benchQueue, mode, done)
		}
	}
	variants := []throughputVariant{
		{"raw_river", "raw River", riverSchema, nil, raw},
	}
	if r.sizes.ThroughputTriggers {
		variants = append(variants, throughputVariant{"raw_river_switchyard_schema", "raw River on Switchyard's schema", switchyardSchema, nil, raw})
	}
	variants = append(variants,
		throughputVariant{"guard_off", "Switchyard, guard off", switchyardSchema, switchyardMeta, sy(processing.GuardOff)},
		throughputVariant{"full_pipeline", "Switchyard, full pipeline", switchyardSchema, switchyardMeta, sy(processing.GuardBestEffort)},
	)
	// Rounds interleave the variants, so a slow spell of the shared machine
	// hits all of them; each variant's figure is its best round, since
	// interference only ever slows a round down.
	rounds := r.sizes.ThroughputRounds
	params["rounds"] = rounds
	perRound, cpuRounds := map[string][]float64{}, map[string][]float64{}
	for round := range rounds {
		for _, v := range variants {
			rate, cpu, err := r.throughputOnce(ctx, v, n, round)
			if err != nil {
				return nil, err
			}
			perRound[v.id] = append(perRound[v.id], round2(rate))
			cpuRounds[v.id] = append(cpuRounds[v.id], round2(float64(cpu.total().Microseconds())/float64(n)))
		}
	}
	rates, cpus := map[string]float64{}, map[string]float64{}
	for id, rs := range perRound {
		rates[id] = slices.Max(rs)
		cpus[id] = slices.Min(cpuRounds[id])
	}
	params["rounds_tasks_per_s"] = perRound
	params["rounds_cpu_us_per_task"] = cpuRounds
	base := rates["raw_river"]
	var figs []Figure
	for _, v := range variants {
		f := Figure{ID: "throughput." + v.id, Label: "no-op tasks/s, " + v.label, Unit: "tasks/s", Value: rates[v.id]}
		if v.id != "raw_river" {
			f = withBaseline(f, base, "raw River")
		}
		switch v.id {
		case "guard_off":
			f.Target = atLeast("ratio", 0.95)
		case "full_pipeline":
			f.Target = atLeast("ratio", 0.80)
		}
		figs = append(figs, f)
	}
	// The CPU each task cost, all processes involved: what the overhead is
	// when the machine's other tenants blur the rates.
	for _, v := range variants {
		f := Figure{ID: "throughput." + v.id + ".cpu_us_per_task", Label: "CPU per no-op task, " + v.label, Unit: "µs", Value: cpus[v.id]}
		if v.id != "raw_river" {
			f = withBaseline(f, cpus["raw_river"], "raw River")
		}
		figs = append(figs, f)
	}
	return figs, nil
}

func (r *runner) throughputOnce(ctx context.Context, v throughputVariant, n, round int) (float64, cpuUsage, error) {
	pool, _, err := r.newDatabase(ctx, v.schema, benchPoolSize)
	if err != nil {
		return 0, cpuUsage{}, err
	}
	defer pool.Close()
	r.logf("%s (round %d): inserting %d no-op tasks", v.id, round+1, n)
	if err := insertNoops(ctx, pool, benchQueue, n, v.meta, nil); err != nil {
		return 0, cpuUsage{}, err
	}
	if _, err := pool.Exec(ctx, "ANALYZE river_job"); err != nil {
		return 0, cpuUsage{}, err
	}
	var done atomic.Int64
	w, err := v.build(pool, &done)
	if err != nil {
		return 0, cpuUsage{}, err
	}
	stopProfile := r.profile(fmt.Sprintf("%s.%d", v.id, round+1))
	elapsed, cpu, err := r.workAll(ctx, v.id, pool, w, &done, n)
	stopProfile()
	if err != nil {
		return 0, cpuUsage{}, err
	}
	rate := float64(n) / elapsed.Seconds()
	r.logf("%s: %d tasks in %.2fs: %.0f tasks/s; CPU %.1fs (this process %.1fs, Postgres %.1fs, Redis %.1fs): %.0f µs/task",
		v.id, n, elapsed.Seconds(), rate, cpu.total().Seconds(), cpu.Self.Seconds(), cpu.Postgres.Seconds(), cpu.Redis.Seconds(),
		float64(cpu.total().Microseconds())/float64(n))
	return rate, cpu, nil
}

// mustJSON encodes v, which is always encodable.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func round2(x float64) float64 { return round(x, 1) }
