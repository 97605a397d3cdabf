package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/switchyard/switchyard/handlers"
	"github.com/switchyard/switchyard/jobs"
	"github.com/switchyard/switchyard/metrics"
	"github.com/switchyard/switchyard/processing"
)

// latencyWorkers is the executor size of the latency measurements: enough
// for the highest rate with room to spare, so the figures show the
// queue's delay and not a shortage of workers.
const latencyWorkers = 100

// latencyArgs carry the moment the producer called enqueue.
type latencyArgs struct {
	Seq int   `json:"seq"`
	T   int64 `json:"t"` // unix nanoseconds
}

func (latencyArgs) Kind() string     { return "bench.latency" }
func (latencyArgs) TaskType() string { return "bench.latency" }

// latencyRecorder keeps each task's enqueue-to-start time by sequence
// number.
type latencyRecorder struct {
	samples []atomic.Int64 // nanoseconds; 0 until started
	started atomic.Int64
}

func (l *latencyRecorder) record(a latencyArgs) {
	if a.Seq < 0 || a.Seq >= len(l.samples) {
		return
	}
	d := max(time.Now().UnixNano()-a.T, 1)
	if l.samples[a.Seq].CompareAndSwap(0, d) {
		l.started.Add(1)
	}
}

func (l *latencyRecorder) sorted() []time.Duration {
	out := make([]time.Duration, 0, len(l.samples))
	for i := range l.samples {
		if v := l.samples[i].Load(); v > 0 {
			out = append(out, time.Duration(v))
		}
	}
	slices.Sort(out)
	return out
}

type riverLatencyWorker struct {
	river.WorkerDefaults[latencyArgs]
	rec *latencyRecorder
}

func (w *riverLatencyWorker) Work(_ context.Context, job *river.Job[latencyArgs]) error {
	w.rec.record(job.Args)
	return nil
}

// latencySetup is one configuration's worker and producer.
type latencySetup struct {
	id, label string
	schema    schema
	// start starts the workers; enqueue inserts one task (from another
	// pool, as a separate producer process would).
	start   func(ctx context.Context, pool *pgxpool.Pool, rec *latencyRecorder) (worker, error)
	enqueue func(pool *pgxpool.Pool) (func(ctx context.Context, a latencyArgs) error, error)
}

func (r *runner) latencySetups() []latencySetup {
	return []latencySetup{
		{
			id: "river_defaults", label: "River defaults", schema: riverSchema,
			start: func(ctx context.Context, pool *pgxpool.Pool, rec *latencyRecorder) (worker, error) {
				workers := river.NewWorkers()
				river.AddWorker(workers, &riverLatencyWorker{rec: rec})
				return river.NewClient(riverpgxv5.New(pool), &river.Config{
					Queues:  map[string]river.QueueConfig{benchQueue: {MaxWorkers: latencyWorkers}},
					Workers: workers,
					Logger:  r.logger(),
				})
			},
			enqueue: func(pool *pgxpool.Pool) (func(context.Context, latencyArgs) error, error) {
				rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
				if err != nil {
					return nil, err
				}
				return func(ctx context.Context, a latencyArgs) error {
					_, err := rc.Insert(ctx, a, &river.InsertOpts{Queue: benchQueue})
					return err
				}, nil
			},
		},
		{
			id: "switchyard", label: "Switchyard defaults", schema: switchyardSchema,
			start: func(ctx context.Context, pool *pgxpool.Pool, rec *latencyRecorder) (worker, error) {
				reg, mux := latencyRegistry()
				mux.Handle("bench.latency", handlers.Typed(func(_ context.Context, _ *jobs.Task, a latencyArgs) (any, error) {
					rec.record(a)
					return nil, nil
				}))
				m, err := metrics.New(prometheus.NewRegistry(), "bench")
				if err != nil {
					return nil, err
				}
				return processing.New(processing.Config{
					Queues:          map[string]int{benchQueue: latencyWorkers},
					ShutdownTimeout: 5 * time.Second,
					Guard:           processing.GuardConfig{KeyPrefix: r.keyPrefix},
				}, processing.Deps{Pool: pool, Redis: r.rdb, Registry: reg, Handlers: mux, Metrics: m, Logger: r.logger()})
			},
			enqueue: func(pool *pgxpool.Pool) (func(context.Context, latencyArgs) error, error) {
				reg, _ := latencyRegistry()
				client, err := jobs.NewInsertOnlyClient(pool, reg)
				if err != nil {
					return nil, err
				}
				return func(ctx context.Context, a latencyArgs) error {
					_, err := client.Enqueue(ctx, a, nil)
					return err
				}, nil
			},
		},
	}
}

func latencyRegistry() (*jobs.Registry, *handlers.Mux) {
	reg := jobs.NewRegistry()
	_ = jobs.Register[latencyArgs](reg, jobs.TypeConfig{Queue: benchQueue})
	return reg, handlers.NewMux()
}

func (r *runner) latency(ctx context.Context, params map[string]any) ([]Figure, error) {
	params["rates_per_s"] = r.sizes.LatencyRates
	params["seconds_per_rate"] = r.sizes.LatencyDuration.Seconds()
	params["queue_executor_size"] = latencyWorkers
	params["river_defaults"] = fmt.Sprintf("fetch cooldown %s, poll %s", river.FetchCooldownDefault, river.FetchPollIntervalDefault)
	params["switchyard_defaults"] = fmt.Sprintf("fetch cooldown %s, poll %s, guard best-effort", processing.DefaultFetchCooldown, processing.DefaultFetchPollInterval)
	var figs []Figure
	for _, rate := range r.sizes.LatencyRates {
		res := map[string][]time.Duration{}
		sent := map[string]float64{}
		for _, s := range r.latencySetups() {
			lat, rate, err := r.latencyOnce(ctx, s, rate)
			if err != nil {
				return nil, err
			}
			res[s.id], sent[s.id] = lat, rate
		}
		// The rate the producer reached: below the asked rate, enqueueing
		// itself could not keep up on this machine.
		figs = append(figs, withBaseline(Figure{
			ID:    fmt.Sprintf("latency.%d_per_s.sent_per_s", rate),
			Label: fmt.Sprintf("enqueue rate reached at %d/s, Switchyard", rate),
			Unit:  "tasks/s",
			Value: sent["switchyard"],
		}, sent["river_defaults"], "River defaults"))
		for _, p := range []float64{50, 95, 99} {
			f := Figure{
				ID:    fmt.Sprintf("latency.%d_per_s.p%.0f", rate, p),
				Label: fmt.Sprintf("enqueue→start p%.0f at %d/s, Switchyard", p, rate),
				Unit:  "ms",
				Value: percentile(res["switchyard"], p),
			}
			f = withBaseline(f, percentile(res["river_defaults"], p), "River defaults")
			if rate == 200 {
				switch p {
				case 50:
					f.Target = atMost("value", 5)
				case 99:
					f.Target = atMost("value", 25)
				}
			}
			figs = append(figs, f)
		}
	}
	return figs, nil
}

// latencyOnce runs an open-loop producer at rate for the configured time
// against one configuration and returns the sorted enqueue-to-start
// times. The producer sends on a fixed schedule whatever the replies do;
// each task carries the moment its enqueue began.
func (r *runner) latencyOnce(ctx context.Context, s latencySetup, rate int) ([]time.Duration, float64, error) {
	pool, dbURL, err := r.newDatabase(ctx, s.schema, latencyWorkers+8)
	if err != nil {
		return nil, 0, err
	}
	defer pool.Close()
	const producers = 32
	ppool, err := newPool(ctx, dbURL, producers)
	if err != nil {
		return nil, 0, err
	}
	defer ppool.Close()
	// Open the producer's connections now, not during the measurement.
	var conns []*pgxpool.Conn
	for range producers {
		c, err := ppool.Acquire(ctx)
		if err != nil {
			return nil, 0, err
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}

	n := int(float64(rate) * r.sizes.LatencyDuration.Seconds())
	rec := &latencyRecorder{samples: make([]atomic.Int64, n)}
	w, err := s.start(ctx, pool, rec)
	if err != nil {
		return nil, 0, err
	}
	if err := w.Start(ctx); err != nil {
		return nil, 0, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = w.Stop(sctx)
	}()
	enqueue, err := s.enqueue(ppool)
	if err != nil {
		return nil, 0, err
	}
	// Let the workers settle (first fetch, leader election) before timing.
	select {
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	case <-time.After(500 * time.Millisecond):
	}

	label := fmt.Sprintf("%s at %d/s", s.id, rate)
	r.logf("%s: %d tasks over %s", label, n, r.sizes.LatencyDuration)
	jobsCh := make(chan int, n)
	var (
		wg      sync.WaitGroup
		errOnce sync.Once
		sendErr error
	)
	for range producers {
		wg.Go(func() {
			for seq := range jobsCh {
				if err := enqueue(ctx, latencyArgs{Seq: seq, T: time.Now().UnixNano()}); err != nil {
					errOnce.Do(func() { sendErr = err })
				}
			}
		})
	}
	start := time.Now()
	for i := range n {
		due := start.Add(time.Duration(i) * time.Second / time.Duration(rate))
		if d := time.Until(due); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		jobsCh <- i
	}
	close(jobsCh)
	wg.Wait()
	sent := time.Since(start)
	if sendErr != nil {
		return nil, 0, fmt.Errorf("%s: enqueue: %w", label, sendErr)
	}
	if err := waitFor(ctx, 30*time.Second, 10*time.Millisecond, func() (bool, error) { return rec.started.Load() >= int64(n), nil }); err != nil {
		return nil, 0, fmt.Errorf("%s: %d of %d tasks started: %w", label, rec.started.Load(), n, err)
	}
	lat := rec.sorted()
	r.logf("%s: sent at %.0f/s; p50 %.1f ms, p95 %.1f ms, p99 %.1f ms", label, float64(n)/sent.Seconds(),
		percentile(lat, 50), percentile(lat, 95), percentile(lat, 99))
	return lat, float64(n) / sent.Seconds(), nil
}
