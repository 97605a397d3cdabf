package jobs

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/switchyard/switchyard/db"
)

// Client is the producer API: enqueue, inspect, cancel and retry tasks.
// It is safe for concurrent use. Build one per process and pass it down.
type Client struct {
	pool     *pgxpool.Pool
	river    *river.Client[pgx.Tx]
	registry *Registry
}

// NewClient returns a Client over riverClient. The River client may be an
// insert-only client (no queues, see NewRiverClient) or the one a
// processing.Service works with; cancellation of running tasks reaches the
// pod running them either way, through Postgres.
func NewClient(pool *pgxpool.Pool, registry *Registry, riverClient *river.Client[pgx.Tx]) *Client {
	return &Client{pool: pool, river: riverClient, registry: registry}
}

// Registry returns the task types this client knows.
func (c *Client) Registry() *Registry { return c.registry }

// EnqueueOptions are per-task settings; zero fields take the task type's
// TypeConfig.
type EnqueueOptions struct {
	Queue    string
	Priority int // 1 (first) to 4 (last)
	// RunAt schedules the task; Delay is relative to now. At most one of them.
	RunAt       time.Time
	Delay       time.Duration
	MaxAttempts int
	// Timeout bounds each attempt, overriding the type's timeout.
	Timeout time.Duration
	Tags    []string
	// IdempotencyKey makes enqueue idempotent: while a task created with the
	// same key exists, enqueueing again returns it instead of a new task.
	IdempotencyKey string
	// Retry overrides the backoff of the type's retry policy (its
	// InitialBackoff, Multiplier, MaxBackoff and Jitter; MaxAttempts comes
	// from the MaxAttempts option). Classify cannot be stored and is
	// ignored.
	Retry *RetryPolicy
	// Workflow ties the task to a workflow step. Set by the workflow
	// engine; producers leave it nil.
	Workflow *WorkflowRef
}

// EnqueueParams is one task of EnqueueMany.
type EnqueueParams struct {
	Args    Args
	Options *EnqueueOptions
}

// EnqueueResult is the task an enqueue created or, for a repeated
// idempotency key, found.
type EnqueueResult struct {
	Task *Task
	// Duplicate is true when the idempotency key named an existing task.
	Duplicate bool
}

// Enqueue inserts one task.
func (c *Client) Enqueue(ctx context.Context, args Args, opts *EnqueueOptions) (*EnqueueResult, error) {
	res, err := c.EnqueueMany(ctx, []EnqueueParams{{Args: args, Options: opts}})
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// EnqueueMany inserts tasks all or nothing, in one transaction.
func (c *Client) EnqueueMany(ctx context.Context, params []EnqueueParams) ([]*EnqueueResult, error) {
	var res []*EnqueueResult
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		var err error
		res, err = c.EnqueueManyTx(ctx, tx, params)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// EnqueueTx inserts one task in the caller's transaction: the task exists
// only if that transaction commits, so enqueueing can be atomic with the
// caller's own writes.
func (c *Client) EnqueueTx(ctx context.Context, tx pgx.Tx, args Args, opts *EnqueueOptions) (*EnqueueResult, error) {
	res, err := c.EnqueueManyTx(ctx, tx, []EnqueueParams{{Args: args, Options: opts}})
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// EnqueueManyTx inserts tasks in the caller's transaction. Every task is
// validated before anything is written; on error the caller must roll back.
func (c *Client) EnqueueManyTx(ctx context.Context, tx pgx.Tx, params []EnqueueParams) ([]*EnqueueResult, error) {
	if len(params) == 0 {
		return nil, &ValidationError{Field: "tasks", Message: "must not be empty"}
	}
	prepared := make([]preparedTask, len(params))
	for i, p := range params {
		pt, err := c.prepare(p)
		if err != nil {
			if len(params) > 1 {
				var ve *ValidationError
				if errors.As(err, &ve) {
					return nil, &ValidationError{Field: fmt.Sprintf("tasks[%d].%s", i, ve.Field), Message: ve.Message, Err: ve.Err}
				}
				return nil, fmt.Errorf("tasks[%d]: %w", i, err)
			}
			return nil, err
		}
		prepared[i] = pt
	}
	results := make([]*EnqueueResult, len(prepared))
	for i := 0; i < len(prepared); {
		// Consecutive tasks without an idempotency key go in one
		// statement; a task with a key is inserted alone (see insertTx).
		j := i
		for j < len(prepared) && prepared[j].key == "" {
			j++
		}
		if j-i > 1 {
			if err := c.insertManyTx(ctx, tx, prepared[i:j], results[i:j]); err != nil {
				return nil, err
			}
			i = j
			continue
		}
		res, err := c.insertTx(ctx, tx, prepared[i])
		if err != nil {
			return nil, err
		}
		results[i] = res
		i++
	}
	return results, nil
}

// insertManyTx inserts tasks without idempotency keys in one statement and
// fills results in their order.
func (c *Client) insertManyTx(ctx context.Context, tx pgx.Tx, pts []preparedTask, results []*EnqueueResult) error {
	params := make([]river.InsertManyParams, len(pts))
	for i, pt := range pts {
		params[i] = river.InsertManyParams{Args: pt.args, InsertOpts: pt.opts}
	}
	res, err := c.river.InsertManyTx(ctx, tx, params)
	if err != nil {
		return fmt.Errorf("enqueue %d tasks: %w", len(pts), err)
	}
	if len(res) != len(pts) {
		return fmt.Errorf("enqueue %d tasks: %d inserted", len(pts), len(res))
	}
	// Ids are drawn in the order the rows are inserted, which is the
	// order of params; sorting by id restores it whatever order the rows
	// come back in.
	slices.SortFunc(res, func(a, b *rivertype.JobInsertResult) int { return cmp.Compare(a.Job.ID, b.Job.ID) })
	for i, r := range res {
		if r.Job.Kind != pts[i].args.kind {
			return fmt.Errorf("enqueue %d tasks: inserted rows out of order", len(pts))
		}
		results[i] = &EnqueueResult{Task: TaskFromRow(r.Job)}
	}
	return nil
}

// preparedTask is a validated task ready for insertion.
type preparedTask struct {
	args insertArgs
	opts *river.InsertOpts
	key  string
}

// insertArgs is what River inserts: the task type as River's kind and the
// arguments verbatim.
type insertArgs struct {
	kind string
	raw  json.RawMessage
}

func (a insertArgs) Kind() string                 { return a.kind }
func (a insertArgs) MarshalJSON() ([]byte, error) { return a.raw, nil }

var tagRE = regexp.MustCompile(`^[\w][\w\-]+[\w]$`)

// Limits on enqueue options.
const (
	maxTags           = 32
	maxTagLen         = 255
	maxIdempotencyKey = 255
	maxTimeout        = 24 * time.Hour
)

func (c *Client) prepare(p EnqueueParams) (preparedTask, error) {
	if p.Args == nil {
		return preparedTask{}, &ValidationError{Field: "type", Message: "is required"}
	}
	typ, err := c.registry.Lookup(p.Args.TaskType())
	if _, raw := p.Args.(RawArgs); err == nil && raw && typ.Config.Internal {
		err = fmt.Errorf("%w %q (known: %s)", ErrUnknownType, typ.Name, strings.Join(c.registry.Names(), ", "))
	}
	if err != nil {
		return preparedTask{}, &ValidationError{Field: "type", Message: err.Error(), Err: err}
	}
	raw, err := encodeArgs(p.Args)
	if err != nil {
		return preparedTask{}, err
	}
	if err := typ.Validate(raw); err != nil {
		return preparedTask{}, err
	}
	o := EnqueueOptions{}
	if p.Options != nil {
		o = *p.Options
	}
	cfg := typ.Config
	opts := &river.InsertOpts{Queue: cfg.Queue, Priority: cfg.Priority, MaxAttempts: cfg.Retry.MaxAttempts, Tags: o.Tags}
	if o.Queue != "" {
		if err := ValidateQueueName(o.Queue); err != nil {
			return preparedTask{}, &ValidationError{Field: "queue", Message: err.Error()}
		}
		opts.Queue = o.Queue
	}
	if o.Priority != 0 {
		if o.Priority < 1 || o.Priority > 4 {
			return preparedTask{}, &ValidationError{Field: "priority", Message: "must be between 1 and 4"}
		}
		opts.Priority = o.Priority
	}
	if o.MaxAttempts != 0 {
		if o.MaxAttempts < 1 || o.MaxAttempts > 1000 {
			return preparedTask{}, &ValidationError{Field: "max_attempts", Message: "must be between 1 and 1000"}
		}
		opts.MaxAttempts = o.MaxAttempts
	}
	switch {
	case o.Delay < 0:
		return preparedTask{}, &ValidationError{Field: "delay", Message: "must not be negative"}
	case o.Delay > 0 && !o.RunAt.IsZero():
		return preparedTask{}, &ValidationError{Field: "run_at", Message: "give either run_at or delay, not both"}
	case o.Delay > 0:
		opts.ScheduledAt = time.Now().Add(o.Delay)
	case !o.RunAt.IsZero():
		opts.ScheduledAt = o.RunAt
	}
	if o.Timeout < 0 || o.Timeout > maxTimeout {
		return preparedTask{}, &ValidationError{Field: "timeout", Message: "must be between 0 and 24h"}
	}
	if len(o.Tags) > maxTags {
		return preparedTask{}, &ValidationError{Field: "tags", Message: fmt.Sprintf("at most %d tags", maxTags)}
	}
	for i, tag := range o.Tags {
		if len(tag) > maxTagLen || !tagRE.MatchString(tag) {
			return preparedTask{}, &ValidationError{Field: fmt.Sprintf("tags[%d]", i), Message: "must be 3-255 letters, digits, '_' or '-', starting and ending with a letter or digit"}
		}
	}
	if len(o.IdempotencyKey) > maxIdempotencyKey {
		return preparedTask{}, &ValidationError{Field: "idempotency_key", Message: "at most 255 bytes"}
	}
	tm := taskMeta{
		TimeoutMS:      (o.Timeout + time.Millisecond - 1).Milliseconds(), // round up: never drop a timeout
		IdempotencyKey: o.IdempotencyKey,
		Workflow:       o.Workflow,
	}
	if r := o.Retry; r != nil {
		if r.InitialBackoff < 0 || r.MaxBackoff < 0 || r.Jitter < 0 || r.Jitter > 1 || (r.Multiplier != 0 && r.Multiplier < 1) {
			return preparedTask{}, &ValidationError{Field: "retry", Message: "backoffs must not be negative, multiplier must be at least 1, jitter between 0 and 1"}
		}
		tm.Retry = &retryMeta{
			InitialBackoffMS: r.InitialBackoff.Milliseconds(),
			Multiplier:       r.Multiplier,
			MaxBackoffMS:     r.MaxBackoff.Milliseconds(),
			Jitter:           r.Jitter,
		}
	}
	meta, err := json.Marshal(map[string]taskMeta{metaKey: tm})
	if err != nil {
		return preparedTask{}, fmt.Errorf("encode task metadata: %w", err)
	}
	opts.Metadata = meta
	return preparedTask{args: insertArgs{kind: typ.Name, raw: raw}, opts: opts, key: o.IdempotencyKey}, nil
}

// insertTx inserts one prepared task. With an idempotency key, the key row
// is the arbiter: the task is inserted, then the key claimed with ON
// CONFLICT DO NOTHING. A concurrent insert of the same key blocks on the
// key's unique index until the other transaction ends, so exactly one task
// survives; the loser deletes its own task (never visible to anyone, as its
// transaction has not committed) and returns the winner's.
func (c *Client) insertTx(ctx context.Context, tx pgx.Tx, pt preparedTask) (*EnqueueResult, error) {
	if pt.key != "" {
		id, err := db.IdempotencyKeyTaskID(ctx, tx, pt.key)
		switch {
		case err == nil:
			return c.existing(ctx, tx, id)
		case !errors.Is(err, db.ErrNotFound):
			return nil, fmt.Errorf("enqueue: %w", err)
		}
	}
	res, err := c.river.InsertTx(ctx, tx, pt.args, pt.opts)
	if err != nil {
		return nil, fmt.Errorf("enqueue %s: %w", pt.args.kind, err)
	}
	if pt.key != "" {
		winner, err := db.IdempotencyKeyInsert(ctx, tx, pt.key, res.Job.ID)
		if err != nil {
			return nil, fmt.Errorf("enqueue: %w", err)
		}
		if winner != res.Job.ID {
			if _, err := c.river.JobDeleteTx(ctx, tx, res.Job.ID); err != nil {
				return nil, fmt.Errorf("enqueue: drop duplicate task: %w", err)
			}
			return c.existing(ctx, tx, winner)
		}
	}
	return &EnqueueResult{Task: TaskFromRow(res.Job)}, nil
}

func (c *Client) existing(ctx context.Context, tx pgx.Tx, id int64) (*EnqueueResult, error) {
	row, err := c.river.JobGetTx(ctx, tx, id)
	if err != nil {
		return nil, fmt.Errorf("enqueue: load task %d of idempotency key: %w", id, translate(err))
	}
	return &EnqueueResult{Task: TaskFromRow(row), Duplicate: true}, nil
}

// Get returns the task with id, or ErrNotFound.
func (c *Client) Get(ctx context.Context, id int64) (*Task, error) {
	row, err := c.river.JobGet(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get task %d: %w", id, translate(err))
	}
	return TaskFromRow(row), nil
}

// ListParams filters and pages List. Empty filters match everything.
type ListParams struct {
	States []State
	Types  []string
	Queues []string
	// Tags matches tasks carrying all of these tags.
	Tags []string
	// Cursor continues from a previous page's NextCursor.
	Cursor string
	// Limit is the page size: default 100, at most 1000.
	Limit int
}

// ListResult is one page of tasks, oldest first (by id).
type ListResult struct {
	Tasks []*Task
	// NextCursor fetches the next page; empty when this page was the last.
	NextCursor string
}

// List returns tasks matching p.
func (c *Client) List(ctx context.Context, p ListParams) (*ListResult, error) {
	limit := p.Limit
	switch {
	case limit == 0:
		limit = 100
	case limit < 0 || limit > 1000:
		return nil, &ValidationError{Field: "limit", Message: "must be between 1 and 1000"}
	}
	lp := river.NewJobListParams().First(limit).OrderBy(river.JobListOrderByID, river.SortOrderAsc)
	if len(p.States) > 0 {
		states := make([]rivertype.JobState, len(p.States))
		for i, s := range p.States {
			if _, err := ParseState(string(s)); err != nil {
				return nil, &ValidationError{Field: "state", Message: err.Error()}
			}
			states[i] = s.River()
		}
		lp = lp.States(states...)
	}
	if len(p.Types) > 0 {
		lp = lp.Kinds(p.Types...)
	}
	if len(p.Queues) > 0 {
		lp = lp.Queues(p.Queues...)
	}
	if len(p.Tags) > 0 {
		lp = lp.TagsAll(p.Tags...)
	}
	if p.Cursor != "" {
		cur, err := decodeCursor(p.Cursor)
		if err != nil {
			return nil, &ValidationError{Field: "cursor", Message: "malformed cursor; pass next_cursor from a previous page"}
		}
		lp = lp.After(cur)
	}
	res, err := c.river.JobList(ctx, lp)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", translate(err))
	}
	out := &ListResult{Tasks: make([]*Task, len(res.Jobs))}
	for i, row := range res.Jobs {
		out.Tasks[i] = TaskFromRow(row)
	}
	// A full page may have a successor; a short one is the last.
	if len(res.Jobs) == limit && res.LastCursor != nil {
		text, err := res.LastCursor.MarshalText()
		if err != nil {
			return nil, fmt.Errorf("list tasks: encode cursor: %w", err)
		}
		out.NextCursor = base64.RawURLEncoding.EncodeToString(text)
	}
	return out, nil
}

func decodeCursor(s string) (*river.JobListCursor, error) {
	text, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	cur := &river.JobListCursor{}
	if err := cur.UnmarshalText(text); err != nil {
		return nil, err
	}
	return cur, nil
}

// Cancel cancels a task. A queued, scheduled or retrying task is cancelled
// at once; a running one has its handler's context cancelled and becomes
// cancelled when the handler returns an error (a handler that completes
// anyway completes). Cancelling a finished task changes nothing.
func (c *Client) Cancel(ctx context.Context, id int64) (*Task, error) {
	row, err := c.river.JobCancel(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("cancel task %d: %w", id, translate(err))
	}
	return TaskFromRow(row), nil
}

// CancelTx is Cancel in the caller's transaction (the workflow engine
// cancels a step's task atomically with the step).
func (c *Client) CancelTx(ctx context.Context, tx pgx.Tx, id int64) (*Task, error) {
	row, err := c.river.JobCancelTx(ctx, tx, id)
	if err != nil {
		return nil, fmt.Errorf("cancel task %d: %w", id, translate(err))
	}
	return TaskFromRow(row), nil
}

// Retry makes a failed, cancelled or completed task run again now (with one
// more attempt allowed if it had used them all). Retrying a task in progress
// is ErrInvalidState.
func (c *Client) Retry(ctx context.Context, id int64) (*Task, error) {
	task, err := c.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if task.State == StateInProgress {
		return nil, fmt.Errorf("retry task %d: %w: it is in progress", id, ErrInvalidState)
	}
	row, err := c.river.JobRetry(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("retry task %d: %w", id, translate(err))
	}
	return TaskFromRow(row), nil
}

// translate maps River's errors to this package's, and Postgres errors
// through db's mapping (an unreachable database is db.ErrUnavailable).
func translate(err error) error {
	if errors.Is(err, river.ErrNotFound) {
		return ErrNotFound
	}
	return db.Translate("river", err)
}

// NewInsertOnlyClient returns a Client for processes that enqueue and
// inspect tasks but work none (the CLI, producers).
func NewInsertOnlyClient(pool *pgxpool.Pool, registry *Registry) (*Client, error) {
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		SkipUnknownJobCheck: true,
		// A client without queues uses FetchCooldown only to space out its
		// insert notifications, which wake the workers at once: at River's
		// default (100ms) a task enqueued just after another waits for the
		// next notification or poll, up to 100ms. Every insert notifies
		// anyway (the task-event trigger), so notifying each costs little.
		FetchCooldown: river.FetchCooldownMin,
	})
	if err != nil {
		return nil, fmt.Errorf("build insert-only river client: %w", err)
	}
	return NewClient(pool, registry, rc), nil
}
