package workflow

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/db"
	"github.com/switchyard/switchyard/jobs"
)

// Recording task outcomes in batches. Every outcome of an execution is
// applied under the execution's row lock, so outcomes of one execution
// arriving together (the branches of a fan-out finishing on one pod) would
// queue on that lock, one transaction each. Instead they queue here: the
// first caller records its outcome at once, in a transaction of its own;
// the outcomes that arrive while a transaction is running are recorded
// together in the next one. Nothing waits for a timer. Each outcome is
// still fenced on its own claim (a stale one is skipped and reported as
// db.ErrStaleClaim to its caller alone); the rest of the batch commits or
// fails as one.

// maxFinishBatch caps the outcomes of one transaction.
const maxFinishBatch = 100

type finishReq struct {
	claim db.Claim
	ref   *jobs.WorkflowRef
	res   jobs.Outcome
	err   error
	done  chan struct{}
}

// finishQueue is one execution's outcomes waiting to be recorded; busy
// while a transaction records some of them. Guarded by Engine.finishMu.
type finishQueue struct {
	pending []*finishReq
	busy    bool
}

// finishBatched records one outcome, batched with others of the same
// execution, and returns its own result.
func (e *Engine) finishBatched(ctx context.Context, claim db.Claim, ref *jobs.WorkflowRef, res jobs.Outcome) error {
	r := &finishReq{claim: claim, ref: ref, res: res, done: make(chan struct{})}
	id := ref.ExecutionID
	e.finishMu.Lock()
	if e.finishing == nil {
		e.finishing = map[int64]*finishQueue{}
	}
	q := e.finishing[id]
	if q == nil {
		q = &finishQueue{}
		e.finishing[id] = q
	}
	q.pending = append(q.pending, r)
	lead := !q.busy
	q.busy = true
	e.finishMu.Unlock()
	if lead {
		// This caller records the batch its outcome is in; outcomes that
		// arrived meanwhile are recorded by another goroutine, so no
		// caller waits for more than the transaction in flight and its
		// own.
		bctx := context.WithoutCancel(ctx)
		if e.finishNext(bctx, id, q) {
			go func() {
				for e.finishNext(bctx, id, q) {
				}
			}()
		}
	}
	<-r.done
	return r.err
}

// finishNext records a batch of q's pending outcomes and reports whether
// more are pending (the caller must record them; q stays busy).
func (e *Engine) finishNext(ctx context.Context, id int64, q *finishQueue) bool {
	e.finishMu.Lock()
	n := min(len(q.pending), maxFinishBatch)
	batch := slices.Clone(q.pending[:n])
	q.pending = slices.Delete(q.pending, 0, n)
	e.finishMu.Unlock()

	e.finishBatch(ctx, id, batch)
	for _, r := range batch {
		close(r.done)
	}

	e.finishMu.Lock()
	defer e.finishMu.Unlock()
	if len(q.pending) > 0 {
		return true
	}
	q.busy = false
	delete(e.finishing, id)
	return false
}

// finishBatch records outcomes of execution id in one transaction and sets
// each request's err.
func (e *Engine) finishBatch(ctx context.Context, id int64, reqs []*finishReq) {
	var c *change
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		c = nil
		for _, r := range reqs {
			r.err = nil
		}
		// The lock and the steps in one round trip: partial when the
		// outcomes allow it (see partialApplies). The lock is taken
		// before the tasks' rows, the order every engine transaction
		// uses.
		var (
			b       db.Batch
			exec    *db.Execution
			steps   []*db.Step
			open    = map[string]int{}
			partial = partialApplies(reqs)
		)
		db.QueueExecutionLock(&b, id, &exec)
		if partial {
			db.QueueStepsForOutcome(&b, id, stepKeys(reqs), &steps, open)
		} else {
			db.QueueStepList(&b, id, &steps)
		}
		if err := db.SendBatch(ctx, tx, &b, "load execution"); err != nil {
			return translate(fmt.Sprintf("execution %d", id), err)
		}
		var live []*finishReq
		for _, r := range reqs {
			err := recordOutcome(ctx, tx, r.claim, r.res)
			if errors.Is(err, db.ErrStaleClaim) {
				r.err = err
				continue
			}
			if err != nil {
				return err
			}
			live = append(live, r)
		}
		if len(live) == 0 {
			return nil
		}
		var err error
		if partial {
			c = e.partialChange(tx, exec, steps, open)
			err := applyOutcomes(ctx, c, live)
			if !errors.Is(err, errNeedFull) {
				if err != nil {
					return err
				}
				return c.flush(ctx)
			}
			// Nothing was written yet: start over with every step.
			if c, err = e.loadSteps(ctx, tx, exec); err != nil {
				return err
			}
		} else {
			c = e.fullChange(tx, exec, steps)
		}
		if err = applyOutcomes(ctx, c, live); err != nil {
			return err
		}
		return c.flush(ctx)
	})
	if err != nil {
		for _, r := range reqs {
			// A claim found stale stays stale; the others failed with the
			// transaction.
			if !errors.Is(r.err, db.ErrStaleClaim) {
				r.err = err
			}
		}
		return
	}
	if c != nil {
		c.afterCommit(ctx)
	}
}

func applyOutcomes(ctx context.Context, c *change, reqs []*finishReq) error {
	for _, r := range reqs {
		if err := c.onOutcome(ctx, r.claim, r.ref, r.res); err != nil {
			return err
		}
	}
	return nil
}

// partialApplies reports whether the outcomes can be applied with only
// their steps and those steps' dependents loaded: completions and retries
// of step tasks. Anything else (failures, timers, children) may touch any
// step.
func partialApplies(reqs []*finishReq) bool {
	for _, r := range reqs {
		if r.ref.Role != "task" || (r.res.Kind != jobs.OutcomeCompleted && r.res.Kind != jobs.OutcomeRetry) {
			return false
		}
	}
	return true
}

func stepKeys(reqs []*finishReq) []string {
	keys := make([]string, 0, len(reqs))
	for _, r := range reqs {
		keys = append(keys, r.ref.Step)
	}
	return keys
}

// partialChange is a change of the locked execution exec holding only the
// steps of some outcomes and their pending dependents (db.StepsForOutcome),
// with the count of each dependent's dependencies not done.
func (e *Engine) partialChange(tx pgx.Tx, exec *db.Execution, steps []*db.Step, open map[string]int) *change {
	c := &change{e: e, tx: tx, exec: exec, steps: steps, byKey: make(map[string]*db.Step, len(steps)),
		partial: true, open: open, orig: make(map[*db.Step]string, len(steps)), origFinal: exec.StepsFinal}
	for _, s := range steps {
		c.byKey[s.Key] = s
		c.orig[s] = s.Status
	}
	return c
}

// Step starts are written like outcomes: the first at once, the ones that
// arrive meanwhile together in the next statement. Each start is its own
// history event whichever statement writes it; a statement, not a start,
// is what costs a commit and a notification.

// maxStartBatch caps the starts of one statement.
const maxStartBatch = 200

type startReq struct {
	start db.StepStart
	err   error
	done  chan struct{}
}

// startBatched records one step start, batched with others, and returns
// its result.
func (e *Engine) startBatched(ctx context.Context, start db.StepStart) error {
	r := &startReq{start: start, done: make(chan struct{})}
	e.startMu.Lock()
	e.starting = append(e.starting, r)
	lead := !e.startBusy
	e.startBusy = true
	e.startMu.Unlock()
	if lead {
		bctx := context.WithoutCancel(ctx)
		if e.startNext(bctx) {
			go func() {
				for e.startNext(bctx) {
				}
			}()
		}
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startNext writes a batch of pending starts and reports whether more are
// pending (the caller must write them; startBusy stays set).
func (e *Engine) startNext(ctx context.Context) bool {
	e.startMu.Lock()
	n := min(len(e.starting), maxStartBatch)
	batch := slices.Clone(e.starting[:n])
	e.starting = slices.Delete(e.starting, 0, n)
	e.startMu.Unlock()

	starts := make([]db.StepStart, len(batch))
	for i, r := range batch {
		starts[i] = r.start
	}
	err := db.StepMarkStartedMany(ctx, e.pool, starts)
	for _, r := range batch {
		r.err = err
		close(r.done)
	}

	e.startMu.Lock()
	defer e.startMu.Unlock()
	if len(e.starting) > 0 {
		return true
	}
	e.startBusy = false
	return false
}
