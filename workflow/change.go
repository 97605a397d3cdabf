package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/db"
	"github.com/switchyard/switchyard/jobs"
)

// change is one transaction's work on one execution: the execution row
// (locked), its steps, and what the transaction will write. Methods change
// the in-memory state; flush writes it; afterCommit updates the cache.
type change struct {
	e     *Engine
	tx    pgx.Tx
	exec  *db.Execution
	steps []*db.Step // definition order
	byKey map[string]*db.Step

	// partial is set when steps holds only the steps whose task outcomes
	// this change applies and their pending dependents (Finish's common
	// case, see loadPartial); open then counts each dependent's
	// dependencies that were not done when loaded, orig holds every
	// loaded step's status as loaded and origFinal the execution's count
	// of final steps as loaded. Whatever needs the other steps returns
	// errNeedFull, and the caller starts over with all of them.
	partial   bool
	open      map[string]int
	orig      map[*db.Step]string
	origFinal int

	specs         map[string]*Step // parsed step specs, by key
	dirty         []*db.Step
	statusChanged bool
	events        []pendingEvent
	tasks         []pendingTask
	children      []*change         // child executions started in this transaction
	outputs       map[string][]byte // outputs completed now, for the cache
	dropCache     bool
}

type pendingEvent struct {
	typ  string
	step *string
	data any
}

// pendingTask is a task to insert at flush; onID receives its id.
type pendingTask struct {
	params jobs.EnqueueParams
	onID   func(id int64)
}

func (c *change) event(typ string, step *db.Step, data any) {
	ev := pendingEvent{typ: typ, data: data}
	if step != nil {
		ev.step = &step.Key
	}
	c.events = append(c.events, ev)
}

// touch marks a step for writing.
func (c *change) touch(s *db.Step) {
	for _, d := range c.dirty {
		if d == s {
			return
		}
	}
	c.dirty = append(c.dirty, s)
}

// spec is the step's definition.
func (c *change) spec(s *db.Step) *Step {
	if c.specs == nil {
		c.specs = map[string]*Step{}
	}
	if sp, ok := c.specs[s.Key]; ok {
		return sp
	}
	var sp Step
	_ = json.Unmarshal(s.Spec, &sp) // written by startExecution from a validated Step
	c.specs[s.Key] = &sp
	return &sp
}

func (c *change) setStatus(status string, errText string) {
	c.exec.Status = status
	if errText == "" {
		c.exec.Error = nil
	} else {
		c.exec.Error = &errText
	}
	c.statusChanged = true
}

// startExecution writes a new execution with its steps and dispatches its
// root steps. It fills c (a fresh change) with the execution.
func (c *change) startExecution(ctx context.Context, def *Definition, parentID *int64, parentStep string) (*db.Execution, error) {
	defJSON, err := json.Marshal(def)
	if err != nil {
		return nil, fmt.Errorf("encode definition: %w", err)
	}
	input := def.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	row := &db.Execution{Name: def.Name, Definition: defJSON, Input: input, ParentExecutionID: parentID, StepsTotal: len(def.Steps)}
	if def.IdempotencyKey != "" {
		row.IdempotencyKey = &def.IdempotencyKey
	}
	if parentStep != "" {
		row.ParentStepKey = &parentStep
	}
	if def.Timeout > 0 {
		ms := time.Duration(def.Timeout).Milliseconds()
		row.TimeoutMS = &ms
	}
	exec, err := db.ExecutionInsert(ctx, c.tx, row)
	if err != nil {
		return nil, err
	}
	c.exec = exec
	c.byKey = make(map[string]*db.Step, len(def.Steps))
	c.specs = make(map[string]*Step, len(def.Steps))
	for i := range def.Steps {
		sp := &def.Steps[i]
		specJSON, err := json.Marshal(sp)
		if err != nil {
			return nil, fmt.Errorf("encode step %s: %w", sp.Key, err)
		}
		s := &db.Step{ExecutionID: exec.ID, Key: sp.Key, Position: i, Kind: sp.kind(), Status: StepPending,
			DependsOn: sp.DependsOn, Optional: sp.Optional, Spec: specJSON}
		if s.DependsOn == nil {
			s.DependsOn = []string{}
		}
		c.steps = append(c.steps, s)
		c.byKey[s.Key] = s
		c.specs[s.Key] = sp
	}
	if err := db.StepInsertMany(ctx, c.tx, c.steps); err != nil {
		return nil, err
	}
	c.event("execution_started", nil, map[string]any{"name": def.Name, "steps": len(def.Steps)})
	if err := c.armTimeout(ctx); err != nil {
		return nil, err
	}
	return exec, c.advance(ctx)
}

// armTimeout schedules the execution's timeout timer, if it has a timeout.
func (c *change) armTimeout(ctx context.Context) error {
	if c.exec.TimeoutMS == nil {
		return nil
	}
	c.exec.TimeoutTaskID = nil
	c.statusChanged = true
	runAt := time.Now().Add(time.Duration(*c.exec.TimeoutMS) * time.Millisecond)
	c.control("execution_timeout", "", 0, runAt, func(id int64) { c.exec.TimeoutTaskID = &id })
	return nil
}

// control queues one of the engine's own tasks for this execution.
func (c *change) control(role, step string, childID int64, runAt time.Time, onID func(int64)) {
	c.controlFor(c.exec.ID, role, step, childID, runAt, onID)
}

func (c *change) controlFor(executionID int64, role, step string, childID int64, runAt time.Time, onID func(int64)) {
	c.tasks = append(c.tasks, pendingTask{
		params: jobs.EnqueueParams{Args: controlArgs{}, Options: &jobs.EnqueueOptions{
			RunAt:    runAt,
			Workflow: &jobs.WorkflowRef{ExecutionID: executionID, Step: step, Role: role, ChildID: childID},
		}},
		onID: onID,
	})
}

// depsDone reports whether a step's dependencies allow it to run: each is
// completed or skipped, or failed or cancelled while optional.
func (c *change) depsDone(s *db.Step) bool {
	if c.partial {
		// The dependencies not done when loaded, less those done since.
		open := c.open[s.Key]
		for _, k := range s.DependsOn {
			if d := c.byKey[k]; d != nil && !depDone(d, c.orig[d]) && depDone(d, d.Status) {
				open--
			}
		}
		return open == 0
	}
	for _, k := range s.DependsOn {
		if !depDone(c.byKey[k], c.byKey[k].Status) {
			return false
		}
	}
	return true
}

// depDone reports whether dependency d in status lets its dependents run.
func depDone(d *db.Step, status string) bool {
	switch {
	case status == StepCompleted, status == StepSkipped:
		return true
	case (status == StepFailed || status == StepCancelled) && d.Optional:
		return true
	}
	return false
}

// errNeedFull is returned by a partial change that needs every step.
var errNeedFull = errors.New("workflow: change needs all steps")

// finalSteps counts the execution's final steps as of now.
func (c *change) finalSteps() int {
	if c.partial {
		n := c.origFinal
		for _, s := range c.steps {
			if StepFinal(s.Status) && !StepFinal(c.orig[s]) {
				n++
			} else if !StepFinal(s.Status) && StepFinal(c.orig[s]) {
				n--
			}
		}
		return n
	}
	n := 0
	for _, s := range c.steps {
		if StepFinal(s.Status) {
			n++
		}
	}
	return n
}

// advance makes every pending step whose dependencies are done ready and,
// unless the execution is paused, dispatches it; then finishes the
// execution if every step is final. It repeats because a step can
// complete as it is dispatched (a wait whose signal already arrived).
func (c *change) advance(ctx context.Context) error {
	for progressed := true; progressed && !ExecutionFinal(c.exec.Status); {
		progressed = false
		for _, s := range c.steps {
			if s.Status != StepPending || !c.depsDone(s) {
				continue
			}
			if c.partial && s.Kind != "task" && s.Kind != "delay" {
				// A wait may complete at once with a kept signal, and
				// its dependents are not loaded.
				return errNeedFull
			}
			s.Status = StepReady
			c.touch(s)
			c.event("step_ready", s, nil)
			if c.exec.Status == StatusPaused {
				continue // held until Resume
			}
			if err := c.dispatch(ctx, s); err != nil {
				return err
			}
			progressed = true
		}
	}
	return c.finishIfDone(ctx)
}

// dispatch starts a ready step according to its kind.
func (c *change) dispatch(ctx context.Context, s *db.Step) error {
	sp := c.spec(s)
	now := time.Now()
	c.touch(s)
	switch s.Kind {
	case "task":
		t := sp.Task
		opts := &jobs.EnqueueOptions{
			Queue: t.Queue, Priority: t.Priority, Timeout: time.Duration(t.Timeout),
			Workflow: &jobs.WorkflowRef{ExecutionID: c.exec.ID, Step: s.Key, Role: "task", DependsOn: s.DependsOn},
		}
		if r := t.Retry; r != nil {
			opts.MaxAttempts = r.MaxAttempts
			if r.InitialBackoff > 0 || r.Multiplier > 0 || r.MaxBackoff > 0 || r.Jitter > 0 {
				opts.Retry = &jobs.RetryPolicy{InitialBackoff: time.Duration(r.InitialBackoff), Multiplier: r.Multiplier,
					MaxBackoff: time.Duration(r.MaxBackoff), Jitter: r.Jitter}
			}
		}
		s.Status = StepReady
		c.tasks = append(c.tasks, pendingTask{
			params: jobs.EnqueueParams{Args: jobs.RawArgs{Type: t.Type, JSON: t.Args}, Options: opts},
			onID:   func(id int64) { s.TaskID = &id },
		})
	case "delay":
		runAt := sp.Delay.Until
		if runAt.IsZero() {
			runAt = now.Add(time.Duration(sp.Delay.Duration))
		}
		s.Status, s.StartedAt = StepWaiting, &now
		c.control("delay", s.Key, 0, runAt, func(id int64) { s.TaskID = &id })
		c.event("step_waiting", s, map[string]any{"until": runAt})
	case "wait":
		s.Status, s.StartedAt = StepWaiting, &now
		if consumed, err := c.tryConsume(ctx, s); err != nil || consumed {
			return err
		}
		if sp.Wait.Timeout > 0 {
			c.control("wait_timeout", s.Key, 0, now.Add(time.Duration(sp.Wait.Timeout)), func(id int64) { s.TaskID = &id })
		}
		c.event("step_waiting", s, map[string]any{"signal": sp.Wait.Signal})
	case "workflow":
		child := &change{e: c.e, tx: c.tx}
		parent := c.exec.ID
		exec, err := child.startExecution(ctx, sp.Workflow, &parent, s.Key)
		if err != nil {
			return fmt.Errorf("start child workflow of step %s: %w", s.Key, err)
		}
		c.children = append(c.children, child)
		s.Status, s.StartedAt, s.ChildExecutionID = StepRunning, &now, &exec.ID
		c.event("step_started", s, map[string]any{"child_execution_id": exec.ID})
	}
	return nil
}

// tryConsume completes a waiting wait step with a signal that already
// arrived, if any.
func (c *change) tryConsume(ctx context.Context, s *db.Step) (bool, error) {
	payload, err := db.SignalConsume(ctx, c.tx, c.exec.ID, c.spec(s).Wait.Signal, s.Key)
	if errors.Is(err, db.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c.complete(s, payload)
	return true, nil
}

// consumeSignal completes the waiting step s with the oldest unconsumed
// signal of its name and cancels its timeout timer.
func (c *change) consumeSignal(ctx context.Context, s *db.Step) error {
	timer := s.TaskID
	if _, err := c.tryConsume(ctx, s); err != nil {
		return err
	}
	if timer != nil {
		if _, err := c.e.jobs.CancelTx(ctx, c.tx, *timer); err != nil && !errors.Is(err, jobs.ErrNotFound) {
			return err
		}
	}
	return nil
}

// complete marks a step completed with output.
func (c *change) complete(s *db.Step, output json.RawMessage) {
	now := time.Now()
	if len(output) == 0 {
		output = nil
	}
	s.Status, s.Output, s.Error, s.FinishedAt = StepCompleted, output, nil, &now
	c.touch(s)
	c.event("step_completed", s, nil)
	if output != nil {
		if c.outputs == nil {
			c.outputs = map[string][]byte{}
		}
		c.outputs[s.Key] = output
	}
}

// fail marks a step failed (or cancelled) with errText; a non-optional one
// fails the execution.
func (c *change) fail(ctx context.Context, s *db.Step, status, errText string) error {
	now := time.Now()
	s.Status, s.Error, s.FinishedAt = status, &errText, &now
	c.touch(s)
	c.event("step_"+status, s, map[string]any{"error": errText})
	if s.Optional {
		return nil
	}
	return c.stop(ctx, StatusFailed, fmt.Sprintf("step %s %s: %s", s.Key, status, errText), StepSkipped)
}

// stop ends the execution with status: steps in flight are cancelled
// (their tasks' handlers too, and child executions), pending steps become
// pendingStatus.
func (c *change) stop(ctx context.Context, status, reason, pendingStatus string) error {
	if c.partial {
		return errNeedFull
	}
	c.setStatus(status, reason)
	now := time.Now()
	for _, s := range c.steps {
		if StepFinal(s.Status) {
			continue
		}
		if s.Status == StepPending {
			s.Status, s.FinishedAt = pendingStatus, &now
			c.touch(s)
			c.event("step_"+pendingStatus, s, nil)
			continue
		}
		if s.TaskID != nil {
			if _, err := c.e.jobs.CancelTx(ctx, c.tx, *s.TaskID); err != nil && !errors.Is(err, jobs.ErrNotFound) {
				return fmt.Errorf("cancel task of step %s: %w", s.Key, err)
			}
		}
		if s.ChildExecutionID != nil {
			c.controlFor(*s.ChildExecutionID, "cancel", "", 0, time.Time{}, nil)
		}
		s.Status, s.FinishedAt = StepCancelled, &now
		c.touch(s)
		c.event("step_cancelled", s, map[string]any{"reason": reason})
	}
	c.event("execution_"+status, nil, map[string]any{"reason": reason})
	return c.finished(ctx)
}

// finishIfDone completes the execution when every step is final.
func (c *change) finishIfDone(ctx context.Context) error {
	if ExecutionFinal(c.exec.Status) {
		return nil
	}
	if c.partial {
		if c.finalSteps() < c.exec.StepsTotal {
			return nil
		}
		// Completing the execution is decided on all the steps.
		return errNeedFull
	}
	for _, s := range c.steps {
		if !StepFinal(s.Status) {
			return nil
		}
	}
	c.setStatus(StatusCompleted, "")
	c.event("execution_completed", nil, nil)
	return c.finished(ctx)
}

// finished runs when the execution reaches a final status: its timeout
// timer is cancelled, the cache goes, and a parent execution is told
// through a control task.
func (c *change) finished(ctx context.Context) error {
	c.dropCache = true
	if id := c.exec.TimeoutTaskID; id != nil {
		if _, err := c.e.jobs.CancelTx(ctx, c.tx, *id); err != nil && !errors.Is(err, jobs.ErrNotFound) {
			return fmt.Errorf("cancel execution timer: %w", err)
		}
	}
	if c.exec.ParentExecutionID != nil && c.exec.ParentStepKey != nil {
		c.controlFor(*c.exec.ParentExecutionID, "child_finished", *c.exec.ParentStepKey, c.exec.ID, time.Time{}, nil)
	}
	return nil
}

// flush writes everything the change did: new tasks first (steps record
// their ids), then steps, the execution row and the history; then the
// same for child executions started in this transaction.
func (c *change) flush(ctx context.Context) error {
	if len(c.tasks) > 0 {
		params := make([]jobs.EnqueueParams, len(c.tasks))
		for i, t := range c.tasks {
			params[i] = t.params
		}
		res, err := c.e.jobs.EnqueueManyTx(ctx, c.tx, params)
		if err != nil {
			return fmt.Errorf("insert step tasks: %w", err)
		}
		for i, t := range c.tasks {
			if t.onID != nil {
				t.onID(res[i].Task.ID)
			}
		}
		c.tasks = nil
	}
	// The steps, the execution row and the history in one round trip.
	var b db.Batch
	db.QueueStepUpdateMany(&b, c.exec.ID, c.dirty)
	final := c.finalSteps()
	if c.statusChanged || len(c.dirty) > 0 || final != c.exec.StepsFinal {
		c.exec.StepsFinal = final
		db.QueueExecutionUpdate(&b, c.exec)
	}
	c.dirty = nil
	events := make([]db.EventInsert, len(c.events))
	for i, ev := range c.events {
		events[i] = db.EventInsert{Type: ev.typ, StepKey: ev.step}
		if ev.data != nil {
			events[i].Data, _ = json.Marshal(ev.data)
		}
	}
	db.QueueExecutionEventInsertMany(&b, c.exec.ID, events)
	if err := db.SendBatch(ctx, c.tx, &b, "write execution changes"); err != nil {
		return err
	}
	c.events = nil
	for _, child := range c.children {
		if err := child.flush(ctx); err != nil {
			return err
		}
	}
	return nil
}

// afterCommit updates the context cache once the change is durable.
func (c *change) afterCommit(ctx context.Context) {
	if c.dropCache || ExecutionFinal(c.exec.Status) {
		c.e.cache.drop(ctx, c.exec.ID)
	} else if len(c.outputs) > 0 {
		c.e.cache.addOutputs(ctx, c.exec.ID, c.outputs)
	}
	for _, child := range c.children {
		child.afterCommit(ctx)
	}
}
