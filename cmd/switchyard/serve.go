package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard/switchyard/api"
	"github.com/switchyard/switchyard/chaos"
	"github.com/switchyard/switchyard/db"
	"github.com/switchyard/switchyard/demo"
	"github.com/switchyard/switchyard/events"
	"github.com/switchyard/switchyard/handlers"
	"github.com/switchyard/switchyard/jobs"
	"github.com/switchyard/switchyard/metrics"
	"github.com/switchyard/switchyard/migrations"
	"github.com/switchyard/switchyard/processing"
	"github.com/switchyard/switchyard/workflow"
)

// serveFlags are the settings of switchyard serve.
type serveFlags struct {
	conn              connFlags
	log               logFlags
	httpAddr          string
	runAPI            bool
	runWorkers        bool
	apiTokens         string
	apiTokensFile     string
	maxBodyBytes      int64
	metricsAuth       bool
	demoHandlers      bool
	chaosHandlers     bool
	podID             string
	queues            queuesFlag
	guardMode         string
	guardTTL          time.Duration
	guardKeyPrefix    string
	shutdownTimeout   time.Duration
	heartbeat         time.Duration
	rescueInterval    time.Duration
	rescueAfter       time.Duration
	fetchCooldown     time.Duration
	fetchPollInterval time.Duration
}

func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := serveFlags{queues: queuesFlag{"default": processing.DefaultExecutorSize}}
	fs := newFlagSet("serve", stderr)
	f.conn.register(fs, true)
	f.log.register(fs)
	fs.StringVar(&f.httpAddr, "http-addr", ":8080", "address of the HTTP server (API, /metrics, /healthz, /readyz)")
	fs.BoolVar(&f.runAPI, "api", true, "serve the HTTP API under /v1 (false: only /metrics, /healthz, /readyz)")
	fs.BoolVar(&f.runWorkers, "workers", true, "run workers for --queues (false: an API-only pod)")
	fs.StringVar(&f.apiTokens, "api-tokens", "", "API tokens, comma-separated NAME:SCOPE:SECRET with SCOPE read, write or admin")
	fs.StringVar(&f.apiTokensFile, "api-tokens-file", "", "file of API tokens, one NAME:SCOPE:SECRET per line")
	fs.Int64Var(&f.maxBodyBytes, "max-body-bytes", api.DefaultMaxBodyBytes, "largest accepted request body")
	fs.BoolVar(&f.metricsAuth, "metrics-auth", false, "require a read token for /metrics")
	fs.BoolVar(&f.demoHandlers, "demo-handlers", false, "also register the demo's simulated model-deployment handlers (make demo)")
	fs.BoolVar(&f.chaosHandlers, "chaos-handlers", false, "also register the chaos suite's chaos.work handler (switchyard chaos; needs the suite's tables)")
	fs.StringVar(&f.podID, "pod-id", "", "this pod's id, unique among running pods (default <hostname>-<pid>-<random>)")
	fs.Var(f.queues, "queues", "queues to work and their executor sizes, e.g. default=10,email=5")
	fs.StringVar(&f.guardMode, "guard-mode", string(processing.GuardBestEffort), "when Redis is unreachable: best-effort (run unguarded), strict (snooze), off (no guard)")
	fs.DurationVar(&f.guardTTL, "guard-ttl", processing.DefaultGuardTTL, "guard lock TTL; refreshed every TTL/3")
	fs.StringVar(&f.guardKeyPrefix, "guard-key-prefix", processing.DefaultGuardKeyPrefix, "prefix of guard lock keys in Redis")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", processing.DefaultShutdownTimeout, "how long running tasks may finish on shutdown before they are cancelled and re-queued")
	fs.DurationVar(&f.heartbeat, "heartbeat-interval", processing.DefaultHeartbeatInterval, "how often the pod records its heartbeat and busy counts")
	fs.DurationVar(&f.rescueInterval, "rescue-interval", processing.DefaultRescueInterval, "how often the pod looks for in-progress tasks of dead pods")
	fs.DurationVar(&f.rescueAfter, "rescue-after", processing.DefaultRescueAfter, "heartbeat age after which a pod counts as dead and its in-progress tasks are rescued")
	fs.DurationVar(&f.fetchCooldown, "fetch-cooldown", processing.DefaultFetchCooldown, "least time between two fetches of a queue")
	fs.DurationVar(&f.fetchPollInterval, "fetch-poll-interval", processing.DefaultFetchPollInterval, "queue poll interval when no insert notification arrives")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if err := applyEnv(fs, getenv); err != nil {
		return err
	}
	logger, err := f.log.logger(stderr)
	if err != nil {
		return err
	}
	mode, err := processing.ParseGuardMode(f.guardMode)
	if err != nil {
		return fmt.Errorf("--guard-mode / SWITCHYARD_GUARD_MODE: %w", err)
	}
	if !f.runAPI && !f.runWorkers {
		return errors.New("--api=false and --workers=false leave nothing to run")
	}
	var tokens []api.Token
	if f.runAPI {
		if tokens, err = loadTokens(f.apiTokens, f.apiTokensFile); err != nil {
			return err
		}
	}

	maxConns := f.conn.dbMaxConns
	if maxConns == 0 {
		maxConns = 8
		if f.runWorkers {
			for _, n := range f.queues {
				maxConns += n
			}
		}
	}
	pool, err := db.NewPool(ctx, db.PoolConfig{URL: f.conn.databaseURL, MaxConns: int32(maxConns)})
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := checkSchema(ctx, f.conn.databaseURL); err != nil {
		return err
	}

	var rdb *redis.Client
	if f.runWorkers && mode != processing.GuardOff {
		rdb, err = newRedis(f.conn.redisURL)
		if err != nil {
			return err
		}
		defer rdb.Close()
	}

	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, buildVersion())
	if err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	if err := reg.Register(metrics.NewQueueCollector(queueStats{pool}, 5*time.Second, f.queues.names()...)); err != nil {
		return fmt.Errorf("register queue collector: %w", err)
	}

	registry := jobs.NewRegistry()
	mux := handlers.NewMux()
	if err := handlers.RegisterBuiltins(registry, mux, handlers.BuiltinConfig{}); err != nil {
		return err
	}
	if f.demoHandlers {
		if err := demo.Register(registry, mux); err != nil {
			return err
		}
	}
	// The pod id is decided here, not in processing.New, because the
	// chaos handler records it with each run.
	podID := f.podID
	if podID == "" {
		podID = processing.DefaultID()
	}
	if f.chaosHandlers {
		if err := chaos.Register(registry, mux, chaos.HandlerDeps{Pool: pool, PodID: podID, Logger: logger}); err != nil {
			return err
		}
	}
	// One insert-only client serves the API and the workflow engine: River
	// announces every insert with a notification, so this pod's workers
	// wake up for it all the same.
	client, err := jobs.NewInsertOnlyClient(pool, registry)
	if err != nil {
		return err
	}
	workflows, err := workflow.New(workflow.Config{CacheKeyPrefix: f.guardKeyPrefix}, workflow.Deps{Pool: pool, Jobs: client, Redis: rdb, Logger: logger})
	if err != nil {
		return err
	}

	var svc *processing.Service
	if f.runWorkers {
		workflows.RegisterHandlers(mux)
		svc, err = processing.New(processing.Config{
			ID:      podID,
			Version: buildVersion(),
			Queues:  f.queues,
			Guard: processing.GuardConfig{
				Mode:      mode,
				TTL:       f.guardTTL,
				KeyPrefix: f.guardKeyPrefix,
			},
			ShutdownTimeout:   f.shutdownTimeout,
			HeartbeatInterval: f.heartbeat,
			RescueInterval:    f.rescueInterval,
			RescueAfter:       f.rescueAfter,
			FetchCooldown:     f.fetchCooldown,
			FetchPollInterval: f.fetchPollInterval,
		}, processing.Deps{Pool: pool, Redis: rdb, Registry: registry, Handlers: mux, Metrics: m, Logger: logger, Workflow: workflows})
		if err != nil {
			return err
		}
	}

	var broker *events.Broker
	if f.runAPI {
		broker = events.NewBroker(pool, events.Config{}, logger)
	}
	apiServer, err := api.New(api.Config{
		Tokens:       tokens,
		MaxBodyBytes: f.maxBodyBytes,
		MetricsAuth:  f.metricsAuth,
		OpsOnly:      !f.runAPI,
	}, api.Deps{
		Jobs:          client,
		Pool:          pool,
		Workflows:     workflows,
		Events:        eventSource(broker),
		Metrics:       reg,
		Ready:         readiness(pool, rdb, mode == processing.GuardStrict),
		PodStaleAfter: 3 * f.heartbeat,
		Logger:        logger,
	})
	if err != nil {
		return err
	}

	srv := &http.Server{
		Addr:              f.httpAddr,
		Handler:           apiServer,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	ln, err := net.Listen("tcp", f.httpAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", f.httpAddr, err)
	}
	httpErr := make(chan error, 1)
	go func() { httpErr <- srv.Serve(ln) }()
	logger.Info("http listening", "addr", ln.Addr().String(), "api", f.runAPI, "workers", f.runWorkers)

	// A signal during start-up is a clean stop, not a failure.
	startFailed := func(err error) error {
		_ = srv.Close()
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if broker != nil {
		if err := broker.Start(ctx); err != nil {
			return startFailed(err)
		}
	}
	if svc != nil {
		if err := svc.Start(ctx); err != nil {
			return startFailed(err)
		}
	}
	apiServer.MarkStarted()

	select {
	case <-ctx.Done():
	case err := <-httpErr:
		logger.Error("http server failed; shutting down", "err", err)
	}

	// Shutdown order: readiness goes false and event streams end first, so
	// load balancers stop sending; then workers stop fetching and finish or
	// re-queue their tasks (and deregister the pod); then the event
	// listener stops; the HTTP server (liveness, metrics) goes last; the
	// deferred closes of Redis and the pool run after that.
	apiServer.BeginShutdown()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.shutdownTimeout+15*time.Second)
	defer cancel()
	var stopErr error
	if svc != nil {
		stopErr = svc.Stop(stopCtx)
	}
	if broker != nil {
		if err := broker.Stop(stopCtx); err != nil {
			logger.Warn("event broker stop", "err", err)
		}
	}
	if err := srv.Shutdown(stopCtx); err != nil {
		logger.Warn("http shutdown", "err", err)
	}
	logger.Info("shut down")
	return stopErr
}

// eventSource returns broker as the API's event source, or nil for an
// ops-only server (a nil *Broker in an interface would not be nil).
func eventSource(broker *events.Broker) interface {
	Subscribe() (<-chan events.Batch, func())
} {
	if broker == nil {
		return nil
	}
	return broker
}

// loadTokens reads API tokens from the flag/env value and the file.
func loadTokens(inline, file string) ([]api.Token, error) {
	tokens, err := api.ParseTokens(strings.NewReader(inline))
	if err != nil {
		return nil, fmt.Errorf("--api-tokens / SWITCHYARD_API_TOKENS: %w", err)
	}
	if file != "" {
		fh, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("--api-tokens-file: %w", err)
		}
		defer fh.Close()
		more, err := api.ParseTokens(fh)
		if err != nil {
			return nil, fmt.Errorf("--api-tokens-file %s: %w", file, err)
		}
		tokens = append(tokens, more...)
	}
	return tokens, nil
}

// readiness checks what a pod needs to serve: Postgres, and Redis when the
// guard is strict (best-effort runs without it).
func readiness(pool *pgxpool.Pool, rdb *redis.Client, needRedis bool) func(context.Context) error {
	return func(ctx context.Context) error {
		var problems []error
		if err := pool.Ping(ctx); err != nil {
			problems = append(problems, fmt.Errorf("postgres: %w", err))
		}
		if needRedis && rdb != nil {
			if err := rdb.Ping(ctx).Err(); err != nil {
				problems = append(problems, fmt.Errorf("redis: %w", err))
			}
		}
		return errors.Join(problems...)
	}
}

// checkSchema refuses to run against a database whose schema is not the
// one this binary was built for.
func checkSchema(ctx context.Context, databaseURL string) error {
	mig, err := migrations.New(databaseURL)
	if err != nil {
		return err
	}
	defer mig.Close()
	v, dirty, err := mig.Version(ctx)
	if err != nil {
		return err
	}
	switch {
	case dirty:
		return fmt.Errorf("database schema version %d is dirty: a migration failed half-way; see switchyard migrate", v)
	case v < migrations.Latest():
		return fmt.Errorf("database schema is at version %d, this binary needs %d: run switchyard migrate up", v, migrations.Latest())
	case v > migrations.Latest():
		return fmt.Errorf("database schema is at version %d, newer than this binary's %d: upgrade switchyard", v, migrations.Latest())
	}
	return nil
}

// newRedis builds the Redis client with context deadlines honoured, so a
// dead Redis costs each call its context timeout and nothing more.
func newRedis(url string) (*redis.Client, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("parse redis url: %w", err)
	}
	opts.ContextTimeoutEnabled = true
	opts.DialTimeout = time.Second
	// The guard's circuit breaker decides about retries; one dial and
	// no command retries keep a dead Redis cheap.
	opts.MaxRetries = -1
	opts.DialerRetries = 1
	return redis.NewClient(opts), nil
}

// queueStats adapts db.QueueStats to the metrics collector.
type queueStats struct{ q db.DBTX }

func (s queueStats) QueueStats(ctx context.Context) ([]metrics.QueueStat, error) {
	rows, err := db.QueueStats(ctx, s.q)
	if err != nil {
		return nil, err
	}
	out := make([]metrics.QueueStat, len(rows))
	for i, r := range rows {
		out[i] = metrics.QueueStat{Queue: r.Queue, State: r.State, Count: r.Count, OldestAge: r.OldestAge}
	}
	return out, nil
}
