package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard/switchyard/db"
	"github.com/switchyard/switchyard/handlers"
	"github.com/switchyard/switchyard/jobs"
)

// ControlTaskType is the task type of the engine's own tasks: delay timers,
// wait and execution timeouts, child-finished notifications and child
// cancellations. Their handler does nothing; the engine acts when their
// outcome is recorded (Finish), under the execution's lock and the fence.
const ControlTaskType = "switchyard.workflow"

// controlArgs are the (empty) arguments of control tasks: what a control
// task is for lives in its WorkflowRef.
type controlArgs struct{}

func (controlArgs) TaskType() string { return ControlTaskType }

// Config configures the Engine. Zero fields take WithDefaults' values.
type Config struct {
	// ControlQueue is the queue of the engine's control tasks; every
	// worker pod serves it. Default "workflow".
	ControlQueue string
	// CacheTTL is how long an execution's context stays in Redis after its
	// last change. Default 1h.
	CacheTTL time.Duration
	// CacheKeyPrefix namespaces the cache keys. Default "switchyard:".
	CacheKeyPrefix string
}

// WithDefaults returns c with unset fields filled in.
func (c Config) WithDefaults() Config {
	if c.ControlQueue == "" {
		c.ControlQueue = "workflow"
	}
	if c.CacheTTL <= 0 {
		c.CacheTTL = time.Hour
	}
	if c.CacheKeyPrefix == "" {
		c.CacheKeyPrefix = "switchyard:"
	}
	return c
}

// Deps are the Engine's collaborators.
type Deps struct {
	Pool *pgxpool.Pool
	// Jobs inserts step tasks and knows the task types.
	Jobs *jobs.Client
	// Redis caches execution contexts; nil disables the cache.
	Redis  redis.UniversalClient
	Logger *slog.Logger
}

// Engine runs workflow executions. Build one per process; it is safe for
// concurrent use.
type Engine struct {
	cfg    Config
	pool   *pgxpool.Pool
	jobs   *jobs.Client
	cache  *contextCache
	logger *slog.Logger

	// finishing holds the task outcomes waiting to be recorded, by
	// execution (see finishBatched).
	finishMu  sync.Mutex
	finishing map[int64]*finishQueue
	// starting holds the step starts waiting to be written (see
	// startBatched).
	startMu   sync.Mutex
	starting  []*startReq
	startBusy bool
}

// New builds an Engine and registers the control task type in the jobs
// client's registry; call RegisterHandlers on worker pods.
func New(cfg Config, deps Deps) (*Engine, error) {
	cfg = cfg.WithDefaults()
	if deps.Pool == nil || deps.Jobs == nil {
		return nil, errors.New("workflow: Pool and Jobs are required")
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	reg := deps.Jobs.Registry()
	if _, err := reg.Lookup(ControlTaskType); err != nil {
		err := jobs.Register[controlArgs](reg, jobs.TypeConfig{
			Queue:    cfg.ControlQueue,
			Timeout:  30 * time.Second,
			Internal: true,
			// A control task only fails when Postgres does; keep trying.
			Retry: jobs.RetryPolicy{MaxAttempts: 1000, InitialBackoff: time.Second, Multiplier: 2, MaxBackoff: time.Minute, Jitter: 0.1},
		})
		if err != nil {
			return nil, fmt.Errorf("workflow: register control task type: %w", err)
		}
	}
	return &Engine{
		cfg: cfg, pool: deps.Pool, jobs: deps.Jobs, logger: deps.Logger,
		cache: newContextCache(deps.Redis, cfg.CacheKeyPrefix, cfg.CacheTTL, deps.Logger),
	}, nil
}

// RegisterHandlers adds the control task's handler to mux.
func (e *Engine) RegisterHandlers(mux *handlers.Mux) {
	mux.HandleFunc(ControlTaskType, func(context.Context, *jobs.Task) (any, error) { return nil, nil })
}

// ControlQueue is the queue of the engine's control tasks.
func (e *Engine) ControlQueue() string { return e.cfg.ControlQueue }

// StartResult is what Start returns.
type StartResult struct {
	Execution *Execution
	// Existing is true when the idempotency key named an earlier execution.
	Existing bool
}

// Start validates def and starts an execution: the execution, its steps,
// its history and the tasks of its root steps are written in one
// transaction.
func (e *Engine) Start(ctx context.Context, def *Definition) (*StartResult, error) {
	var res *StartResult
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		var err error
		res, err = e.StartTx(ctx, tx, def)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// StartTx is Start in the caller's transaction: the execution exists only
// if it commits.
func (e *Engine) StartTx(ctx context.Context, tx pgx.Tx, def *Definition) (*StartResult, error) {
	if err := def.Validate(e.jobs.Registry()); err != nil {
		return nil, err
	}
	if def.IdempotencyKey != "" {
		existing, err := db.ExecutionGetByIdempotencyKey(ctx, tx, def.IdempotencyKey)
		switch {
		case err == nil:
			return &StartResult{Execution: executionView(existing), Existing: true}, nil
		case !errors.Is(err, db.ErrNotFound):
			return nil, fmt.Errorf("start workflow: %w", err)
		}
	}
	c := &change{e: e, tx: tx}
	exec, err := c.startExecution(ctx, def, nil, "")
	if errors.Is(err, db.ErrConflict) { // a concurrent start with the key won
		existing, err := db.ExecutionGetByIdempotencyKey(ctx, tx, def.IdempotencyKey)
		if err != nil {
			return nil, fmt.Errorf("start workflow: %w", err)
		}
		return &StartResult{Execution: executionView(existing), Existing: true}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("start workflow: %w", err)
	}
	if err := c.flush(ctx); err != nil {
		return nil, fmt.Errorf("start workflow: %w", err)
	}
	return &StartResult{Execution: executionView(exec)}, nil
}

// Get returns an execution with its steps.
func (e *Engine) Get(ctx context.Context, id int64) (*Execution, error) {
	exec, err := db.ExecutionGet(ctx, e.pool, id)
	if err != nil {
		return nil, translate(fmt.Sprintf("get execution %d", id), err)
	}
	steps, err := db.StepList(ctx, e.pool, id)
	if err != nil {
		return nil, fmt.Errorf("get execution %d: %w", id, err)
	}
	v := executionView(exec)
	v.Steps = make([]StepState, len(steps))
	for i, s := range steps {
		v.Steps[i] = stepView(s)
	}
	return v, nil
}

// ListParams filters List.
type ListParams struct {
	Statuses []string
	Name     string
	Cursor   string
	Limit    int // default 50, at most 500
}

// ListResult is a page of executions, newest first.
type ListResult struct {
	Executions []*Execution
	NextCursor string
}

// List returns executions, newest first, without their steps.
func (e *Engine) List(ctx context.Context, p ListParams) (*ListResult, error) {
	limit := p.Limit
	switch {
	case limit == 0:
		limit = 50
	case limit < 0 || limit > 500:
		return nil, &jobs.ValidationError{Field: "limit", Message: "must be between 1 and 500"}
	}
	for _, s := range p.Statuses {
		switch s {
		case StatusPending, StatusRunning, StatusPaused, StatusCompleted, StatusFailed, StatusCancelled, StatusTimedOut:
		default:
			return nil, &jobs.ValidationError{Field: "status", Message: fmt.Sprintf("unknown status %q", s)}
		}
	}
	var after int64
	if p.Cursor != "" {
		n, err := strconv.ParseInt(p.Cursor, 10, 64)
		if err != nil || n < 1 {
			return nil, &jobs.ValidationError{Field: "cursor", Message: "malformed cursor; pass next_cursor from a previous page"}
		}
		after = n
	}
	rows, err := db.ExecutionList(ctx, e.pool, db.ExecutionListParams{Statuses: p.Statuses, Name: p.Name, AfterID: after, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("list executions: %w", err)
	}
	res := &ListResult{Executions: make([]*Execution, len(rows))}
	for i, r := range rows {
		res.Executions[i] = executionView(r)
	}
	if len(rows) == limit {
		res.NextCursor = strconv.FormatInt(rows[len(rows)-1].ID, 10)
	}
	return res, nil
}

// History returns an execution's events after afterID (0 for the first),
// oldest first, at most limit (default 500).
func (e *Engine) History(ctx context.Context, id, afterID int64, limit int) ([]Event, error) {
	if limit <= 0 || limit > 5000 {
		limit = 500
	}
	if _, err := db.ExecutionGet(ctx, e.pool, id); err != nil {
		return nil, translate(fmt.Sprintf("history of execution %d", id), err)
	}
	rows, err := db.ExecutionEventList(ctx, e.pool, id, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("history of execution %d: %w", id, err)
	}
	out := make([]Event, len(rows))
	for i, r := range rows {
		out[i] = Event{ID: r.ID, At: r.At, Type: r.Type, Data: r.Data}
		if r.StepKey != nil {
			out[i].Step = *r.StepKey
		}
	}
	return out, nil
}

// SignalResult is what Signal returns.
type SignalResult struct {
	// Duplicate is true when the idempotency key was seen before: the
	// signal was ignored.
	Duplicate bool `json:"duplicate"`
	// ConsumedBy is the wait step the signal completed, or empty when it
	// is kept for a step not reached yet.
	ConsumedBy string `json:"consumed_by,omitempty"`
}

// Signal sends the named signal with payload to an execution. A wait step
// waiting for it completes with the payload as output; otherwise the
// signal is kept and consumed when such a step is reached. A repeated
// idempotency key is ignored.
func (e *Engine) Signal(ctx context.Context, id int64, name string, payload json.RawMessage, idempotencyKey string) (*SignalResult, error) {
	if !keyRE.MatchString(name) || len(name) > maxKeyLength {
		return nil, &jobs.ValidationError{Field: "name", Message: "a signal name of letters, digits, '_', '.' or '-'"}
	}
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	} else if !json.Valid(payload) {
		return nil, &jobs.ValidationError{Field: "payload", Message: "must be JSON"}
	}
	var res *SignalResult
	err := e.withExecution(ctx, id, func(c *change) error {
		if ExecutionFinal(c.exec.Status) {
			return fmt.Errorf("%w: execution is %s", ErrInvalidState, c.exec.Status)
		}
		var key *string
		if idempotencyKey != "" {
			key = &idempotencyKey
		}
		if _, err := db.SignalInsert(ctx, c.tx, id, name, payload, key); errors.Is(err, db.ErrConflict) {
			res = &SignalResult{Duplicate: true}
			return nil
		} else if err != nil {
			return err
		}
		c.event("signal_received", nil, map[string]any{"name": name})
		res = &SignalResult{}
		for _, s := range c.steps {
			if s.Kind == "wait" && s.Status == StepWaiting && c.spec(s).Wait.Signal == name {
				if err := c.consumeSignal(ctx, s); err != nil {
					return err
				}
				res.ConsumedBy = s.Key
				break
			}
		}
		return c.advance(ctx)
	})
	return res, err
}

// Cancel cancels an execution: running tasks' handlers are cancelled,
// waiting and pending steps cancelled, child executions cancelled.
func (e *Engine) Cancel(ctx context.Context, id int64) (*Execution, error) {
	return e.control(ctx, id, func(c *change) error {
		if ExecutionFinal(c.exec.Status) {
			return fmt.Errorf("%w: execution is %s", ErrInvalidState, c.exec.Status)
		}
		return c.stop(ctx, StatusCancelled, "cancelled by request", StepCancelled)
	})
}

// Pause holds the steps that become ready (running ones finish) until
// Resume.
func (e *Engine) Pause(ctx context.Context, id int64) (*Execution, error) {
	return e.control(ctx, id, func(c *change) error {
		if c.exec.Status != StatusRunning {
			return fmt.Errorf("%w: only a running execution can be paused; it is %s", ErrInvalidState, c.exec.Status)
		}
		c.exec.Status = StatusPaused
		c.statusChanged = true
		c.event("execution_paused", nil, nil)
		return nil
	})
}

// Resume dispatches the steps held while paused.
func (e *Engine) Resume(ctx context.Context, id int64) (*Execution, error) {
	return e.control(ctx, id, func(c *change) error {
		if c.exec.Status != StatusPaused {
			return fmt.Errorf("%w: only a paused execution can be resumed; it is %s", ErrInvalidState, c.exec.Status)
		}
		c.exec.Status = StatusRunning
		c.statusChanged = true
		c.event("execution_resumed", nil, nil)
		for _, s := range c.steps {
			if s.Status == StepReady && s.TaskID == nil {
				if err := c.dispatch(ctx, s); err != nil {
					return err
				}
			}
		}
		return c.advance(ctx)
	})
}

// Retry re-runs a failed, timed-out or cancelled execution: its failed,
// skipped and cancelled steps become pending again and run when their
// dependencies allow; completed steps keep their outputs.
func (e *Engine) Retry(ctx context.Context, id int64) (*Execution, error) {
	exec, err := e.control(ctx, id, func(c *change) error {
		switch c.exec.Status {
		case StatusFailed, StatusTimedOut, StatusCancelled:
		default:
			return fmt.Errorf("%w: only a failed, timed-out or cancelled execution can be retried; it is %s", ErrInvalidState, c.exec.Status)
		}
		c.exec.Status, c.exec.Error = StatusRunning, nil
		c.statusChanged = true
		var rerun []string
		for _, s := range c.steps {
			if s.Status == StepCompleted {
				continue
			}
			s.Status, s.TaskID, s.ChildExecutionID, s.Attempt = StepPending, nil, nil, 0
			s.Output, s.Error, s.StartedAt, s.FinishedAt = nil, nil, nil, nil
			c.touch(s)
			rerun = append(rerun, s.Key)
		}
		c.event("execution_retried", nil, map[string]any{"steps": rerun})
		if err := c.armTimeout(ctx); err != nil {
			return err
		}
		c.dropCache = true
		return c.advance(ctx)
	})
	return exec, err
}

// control runs fn under the execution's lock and returns the execution
// afterwards.
func (e *Engine) control(ctx context.Context, id int64, fn func(*change) error) (*Execution, error) {
	if err := e.withExecution(ctx, id, fn); err != nil {
		return nil, err
	}
	return e.Get(ctx, id)
}

// withExecution runs fn in a transaction holding the execution's lock,
// with its steps loaded, and writes what fn changed.
func (e *Engine) withExecution(ctx context.Context, id int64, fn func(*change) error) error {
	var c *change
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		var err error
		if c, err = e.load(ctx, tx, id); err != nil {
			return err
		}
		if err := fn(c); err != nil {
			return err
		}
		return c.flush(ctx)
	})
	if err != nil {
		return err
	}
	c.afterCommit(ctx)
	return nil
}

// load locks the execution and reads its steps.
func (e *Engine) load(ctx context.Context, tx pgx.Tx, id int64) (*change, error) {
	exec, err := db.ExecutionLock(ctx, tx, id)
	if err != nil {
		return nil, translate(fmt.Sprintf("execution %d", id), err)
	}
	return e.loadSteps(ctx, tx, exec)
}

// loadSteps reads every step of the locked execution exec.
func (e *Engine) loadSteps(ctx context.Context, tx pgx.Tx, exec *db.Execution) (*change, error) {
	steps, err := db.StepList(ctx, tx, exec.ID)
	if err != nil {
		return nil, err
	}
	return e.fullChange(tx, exec, steps), nil
}

// fullChange is a change of the locked execution exec with all its steps.
func (e *Engine) fullChange(tx pgx.Tx, exec *db.Execution, steps []*db.Step) *change {
	c := &change{e: e, tx: tx, exec: exec, steps: steps, byKey: make(map[string]*db.Step, len(steps))}
	for _, s := range steps {
		c.byKey[s.Key] = s
	}
	return c
}

// translate maps db.ErrNotFound to ErrNotFound.
func translate(op string, err error) error {
	if errors.Is(err, db.ErrNotFound) {
		return fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	return fmt.Errorf("%s: %w", op, err)
}
