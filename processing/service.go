// Package processing is the ProcessingService: it adapts every registered
// handler to a River worker and runs Switchyard's pipeline for each task a
// pod claims (claim, guard, run, classify, complete, release), with
// per-queue executor sizes and graceful shutdown.
package processing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/switchyard/switchyard/db"
	"github.com/switchyard/switchyard/handlers"
	"github.com/switchyard/switchyard/jobs"
	"github.com/switchyard/switchyard/metrics"
)

// Deps are the Service's collaborators, built once in main's run.
type Deps struct {
	Pool     *pgxpool.Pool
	Redis    redis.UniversalClient // may be nil only with GuardOff
	Registry *jobs.Registry
	Handlers *handlers.Mux
	Metrics  *metrics.Metrics
	Logger   *slog.Logger
	// Workflow records the outcomes of workflow steps; nil when the pod
	// runs no workflows. Its control queue is added to the pod's queues.
	Workflow StepRecorder
}

// StepRecorder is the workflow engine as the pipeline needs it.
type StepRecorder interface {
	// StepStarted records that a handler of a step began (best effort).
	StepStarted(ctx context.Context, claim db.Claim, ref *jobs.WorkflowRef) error
	// LoadContext fills ref.Input and ref.Outputs for the handler.
	LoadContext(ctx context.Context, ref *jobs.WorkflowRef) error
	// Finish records the outcome of a step's task and its consequences in
	// one transaction, fenced on claim; db.ErrStaleClaim when the claim is
	// no longer current. It writes a final outcome to the task's row; a
	// retry it only records for the step, leaving the task running for
	// the worker to hand to River.
	Finish(ctx context.Context, claim db.Claim, ref *jobs.WorkflowRef, res jobs.Outcome) error
	// ControlQueue is the queue of the engine's own tasks (timers, child
	// notifications), which every worker pod serves.
	ControlQueue() string
}

// Service runs the handlers of this pod's queues.
type Service struct {
	cfg     Config
	pool    *pgxpool.Pool
	river   *river.Client[pgx.Tx]
	guard   *guard
	metrics *metrics.Metrics
	logger  *slog.Logger
	// busy counts running handlers per queue for the heartbeat.
	busy      busyCounts
	heartbeat *heartbeater
	workflow  StepRecorder
	rescuer   *rescuer
}

// New builds a Service. Every handler in deps.Handlers must have a task type
// in deps.Registry.
func New(cfg Config, deps Deps) (*Service, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("processing config: %w", err)
	}
	if deps.Pool == nil || deps.Registry == nil || deps.Handlers == nil || deps.Metrics == nil {
		return nil, errors.New("processing: Pool, Registry, Handlers and Metrics are required")
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Workflow != nil {
		if _, ok := cfg.Queues[deps.Workflow.ControlQueue()]; !ok {
			queues := maps.Clone(cfg.Queues)
			queues[deps.Workflow.ControlQueue()] = cfg.WorkflowExecutorSize
			cfg.Queues = queues
		}
	}
	s := &Service{cfg: cfg, pool: deps.Pool, metrics: deps.Metrics, logger: deps.Logger, busy: newBusyCounts(cfg.Queues), workflow: deps.Workflow}
	if cfg.Guard.Mode != GuardOff {
		if deps.Redis == nil {
			return nil, fmt.Errorf("processing: guard mode %s needs a Redis client", cfg.Guard.Mode)
		}
		s.guard = newGuard(cfg.Guard, deps.Redis, deps.Metrics, deps.Logger)
	}

	workers := river.NewWorkers()
	for _, name := range deps.Handlers.Types() {
		typ, err := deps.Registry.Lookup(name)
		if err != nil {
			return nil, fmt.Errorf("processing: handler without task type: %w", err)
		}
		h, _ := deps.Handlers.Handler(name)
		w := &worker{svc: s, typ: typ, handler: h}
		deps.Metrics.InitTaskType(name, typ.Config.Queue)
		if err := addWorker(workers, name, w); err != nil {
			return nil, fmt.Errorf("processing: register worker for %s: %w", name, err)
		}
	}

	queues := make(map[string]river.QueueConfig, len(cfg.Queues))
	for q, n := range cfg.Queues {
		queues[q] = river.QueueConfig{MaxWorkers: n}
		deps.Metrics.InitQueue(q, n)
	}
	rc, err := river.NewClient(riverpgxv5.New(deps.Pool), &river.Config{
		ID:                cfg.ID,
		Queues:            queues,
		Workers:           workers,
		FetchCooldown:     cfg.FetchCooldown,
		FetchPollInterval: cfg.FetchPollInterval,
		// Stop waits this long for running handlers, then cancels them;
		// River gives a cancelled task its attempt back and re-queues it.
		SoftStopTimeout: cfg.ShutdownTimeout,
		// The pipeline applies each task's own timeout.
		JobTimeout: -1,
		// Producers may enqueue types this pod has no handler for.
		SkipUnknownJobCheck: true,
		Logger:              deps.Logger.With("component", "river"),
	})
	if err != nil {
		return nil, fmt.Errorf("processing: build river client: %w", err)
	}
	s.river = rc
	s.heartbeat = newHeartbeater(heartbeatConfig{Interval: cfg.HeartbeatInterval, ID: cfg.ID, Version: cfg.Version},
		deps.Pool, rc, s.podQueues, deps.Logger)
	s.rescuer = newRescuer(deps.Pool, cfg.RescueInterval, cfg.RescueAfter, s.heartbeat.healthyFor, deps.Metrics, deps.Logger)
	return s, nil
}

// RiverClient returns the River client, for jobs.NewClient: enqueueing
// through it wakes this pod's producers at once.
func (s *Service) RiverClient() *river.Client[pgx.Tx] { return s.river }

// Queues returns the queues this pod works, sorted.
func (s *Service) Queues() []string {
	qs := make([]string, 0, len(s.cfg.Queues))
	for q := range s.cfg.Queues {
		qs = append(qs, q)
	}
	sort.Strings(qs)
	return qs
}

// Start begins fetching and working tasks. It returns once started and
// registered in switchyard_pod (heartbeats run until River stops);
// cancelling ctx stops fetching and, after ShutdownTimeout, cancels
// running handlers (prefer Stop).
func (s *Service) Start(ctx context.Context) error {
	// Register before claiming anything: a rescuer treats a claim whose pod
	// has no fresh row as abandoned.
	s.heartbeat.register(ctx)
	if err := s.river.Start(ctx); err != nil {
		return fmt.Errorf("start processing: %w", err)
	}
	// After River, whose stop also ends the heartbeats; the first one is
	// written before this returns, so the pod is listed from then on.
	if err := s.heartbeat.Start(ctx); err != nil {
		return fmt.Errorf("start processing: %w", err)
	}
	if err := s.rescuer.Start(ctx); err != nil {
		return fmt.Errorf("start processing: %w", err)
	}
	s.logger.Info("processing started", "id", s.cfg.ID, "queues", s.cfg.Queues, "guard", s.cfg.Guard.Mode)
	return nil
}

// Stop shuts down gracefully, in this order: stop fetching; let running
// handlers finish for up to ShutdownTimeout; then cancel the rest, whose
// tasks go back to the queue with their attempt given back; wait for the
// completions to be written; deregister the pod from switchyard_pod. ctx
// bounds the whole wait.
func (s *Service) Stop(ctx context.Context) error {
	// The rescuer first: it works for other pods and needs nothing here.
	if err := s.rescuer.Stop(ctx); err != nil {
		return fmt.Errorf("stop processing: %w", err)
	}
	if err := s.river.Stop(ctx); err != nil {
		// Handlers may still run: the pod keeps heartbeating until River
		// has stopped.
		return fmt.Errorf("stop processing: %w", err)
	}
	// Only now, with no handler running, may the pod leave the registry.
	if err := s.heartbeat.Stop(ctx); err != nil {
		return fmt.Errorf("stop processing: %w", err)
	}
	s.logger.Info("processing stopped", "id", s.cfg.ID)
	return nil
}

// addWorker registers w for the task type name. River routes by kind, and
// every task type shares the payload Go type, so the kind comes from the
// registration value through AddWorkerArgs, which panics where other
// registrations return errors; the panic is turned back into an error.
func addWorker(workers *river.Workers, name string, w *worker) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%v", v)
		}
	}()
	river.AddWorkerArgs(workers, payload{kind: name}, river.Worker[payload](w))
	return nil
}
