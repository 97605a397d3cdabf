package workflow

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/switchyard/switchyard/jobs"
)

// Definition is a workflow: a DAG of steps. It is what Start takes, as Go
// values or as JSON (the HTTP API and the CLI send the JSON form).
type Definition struct {
	// Name describes the workflow, e.g. "deploy-model".
	Name string `json:"name"`
	// Input is the execution's input, handed to every step's handler.
	Input json.RawMessage `json:"input,omitempty"`
	// Timeout bounds the whole execution; on expiry it is timed_out.
	Timeout Duration `json:"timeout,omitempty"`
	// IdempotencyKey makes Start idempotent: a second start with the key
	// returns the first execution.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	Steps          []Step `json:"steps"`
}

// Step is one node of the DAG. Exactly one of Task, Delay, Wait and
// Workflow is set.
type Step struct {
	// Key names the step, unique in its workflow.
	Key string `json:"key"`
	// DependsOn lists the keys of the steps that must be completed (or
	// skipped, or failed while optional) before this one runs.
	DependsOn []string `json:"depends_on,omitempty"`
	// Optional steps may fail without failing the execution; for their
	// dependents a failed optional step counts as skipped.
	Optional bool `json:"optional,omitempty"`

	Task     *TaskSpec   `json:"task,omitempty"`
	Delay    *DelaySpec  `json:"delay,omitempty"`
	Wait     *WaitSpec   `json:"wait,omitempty"`
	Workflow *Definition `json:"workflow,omitempty"`
}

// TaskSpec runs a registered task type, with the semantics of a plain task.
type TaskSpec struct {
	Type string          `json:"type"`
	Args json.RawMessage `json:"args,omitempty"`
	// Queue, Priority and Timeout (of one attempt) default to the type's.
	Queue    string   `json:"queue,omitempty"`
	Priority int      `json:"priority,omitempty"`
	Timeout  Duration `json:"timeout,omitempty"`
	// Retry overrides the type's retry policy.
	Retry *RetrySpec `json:"retry,omitempty"`
}

// RetrySpec is a step's retry policy; zero fields keep the type's.
type RetrySpec struct {
	MaxAttempts    int      `json:"max_attempts,omitempty"`
	InitialBackoff Duration `json:"initial_backoff,omitempty"`
	Multiplier     float64  `json:"multiplier,omitempty"`
	MaxBackoff     Duration `json:"max_backoff,omitempty"`
	Jitter         float64  `json:"jitter,omitempty"`
}

// DelaySpec waits for a duration or until a time; durable across restarts.
type DelaySpec struct {
	Duration Duration  `json:"duration,omitempty"`
	Until    time.Time `json:"until,omitzero"`
}

// WaitSpec waits for the named signal; its payload becomes the step's
// output. A signal sent before the step is reached is kept for it.
type WaitSpec struct {
	Signal string `json:"signal"`
	// Timeout fails the step when no signal arrives in time; zero waits
	// forever (bounded by the execution's timeout, if any).
	Timeout Duration `json:"timeout,omitempty"`
}

// Duration is a time.Duration that reads and writes JSON as a Go duration
// string ("90s", "1h30m").
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string such as \"90s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q", s)
	}
	*d = Duration(v)
	return nil
}

// kind is the step's kind: task, delay, wait or workflow.
func (s *Step) kind() string {
	switch {
	case s.Task != nil:
		return "task"
	case s.Delay != nil:
		return "delay"
	case s.Wait != nil:
		return "wait"
	case s.Workflow != nil:
		return "workflow"
	}
	return ""
}

// Limits on definitions.
const (
	maxSteps     = 1000
	maxDuration  = 366 * 24 * time.Hour
	maxNesting   = 5
	maxKeyLength = 128
)

var keyRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.\-]*$`)

// ValidationErrors lists every problem of a definition.
type ValidationErrors []*jobs.ValidationError

func (v ValidationErrors) Error() string {
	parts := make([]string, len(v))
	for i, e := range v {
		parts[i] = e.Error()
	}
	return "invalid workflow definition: " + strings.Join(parts, "; ")
}

// Validate checks the definition against the registry: unique keys, known
// dependencies, no cycles, registered task types, sane durations. It
// returns every problem at once (ValidationErrors), or nil.
func (d *Definition) Validate(reg *jobs.Registry) error {
	var errs ValidationErrors
	d.validate(reg, "", 0, &errs)
	if len(errs) > 0 {
		return errs
	}
	return nil
}

func (d *Definition) validate(reg *jobs.Registry, prefix string, depth int, errs *ValidationErrors) {
	add := func(field, msg string) {
		*errs = append(*errs, &jobs.ValidationError{Field: prefix + field, Message: msg})
	}
	if depth > maxNesting {
		add("workflow", fmt.Sprintf("child workflows nest at most %d deep", maxNesting))
		return
	}
	if strings.TrimSpace(d.Name) == "" {
		add("name", "is required")
	} else if len(d.Name) > 255 {
		add("name", "at most 255 characters")
	}
	if len(d.Input) > 0 && !isJSONObject(d.Input) {
		add("input", "must be a JSON object")
	}
	if d.Timeout < 0 || time.Duration(d.Timeout) > maxDuration {
		add("timeout", "must be between 0 and 366 days")
	}
	if len(d.IdempotencyKey) > 255 {
		add("idempotency_key", "at most 255 bytes")
	}
	if len(d.Steps) == 0 {
		add("steps", "at least one step is required")
	}
	if len(d.Steps) > maxSteps {
		add("steps", fmt.Sprintf("at most %d steps", maxSteps))
		return
	}
	index := map[string]int{}
	for i, s := range d.Steps {
		f := fmt.Sprintf("steps[%d].", i)
		switch {
		case s.Key == "":
			add(f+"key", "is required")
		case len(s.Key) > maxKeyLength || !keyRE.MatchString(s.Key):
			add(f+"key", "must be 1-128 letters, digits, '_', '.' or '-', starting with a letter or digit")
		case index[s.Key] > 0:
			add(f+"key", fmt.Sprintf("duplicate key %q (also steps[%d])", s.Key, index[s.Key]-1))
		default:
			index[s.Key] = i + 1
		}
	}
	for i := range d.Steps {
		s := &d.Steps[i]
		f := fmt.Sprintf("steps[%d].", i)
		for j, dep := range s.DependsOn {
			switch {
			case dep == s.Key:
				add(fmt.Sprintf("%sdepends_on[%d]", f, j), "a step cannot depend on itself")
			case index[dep] == 0:
				add(fmt.Sprintf("%sdepends_on[%d]", f, j), fmt.Sprintf("unknown step %q", dep))
			}
		}
		kinds := 0
		for _, set := range []bool{s.Task != nil, s.Delay != nil, s.Wait != nil, s.Workflow != nil} {
			if set {
				kinds++
			}
		}
		if kinds != 1 {
			add(f+"kind", "set exactly one of task, delay, wait, workflow")
			continue
		}
		switch {
		case s.Task != nil:
			validateTask(reg, s.Task, f+"task.", add)
		case s.Delay != nil:
			switch {
			case s.Delay.Duration != 0 && !s.Delay.Until.IsZero():
				add(f+"delay", "give either duration or until, not both")
			case s.Delay.Duration == 0 && s.Delay.Until.IsZero():
				add(f+"delay", "give a duration or an until time")
			case s.Delay.Duration < 0 || time.Duration(s.Delay.Duration) > maxDuration:
				add(f+"delay.duration", "must be between 0 and 366 days")
			case !s.Delay.Until.IsZero() && time.Until(s.Delay.Until) > maxDuration:
				add(f+"delay.until", "must be within 366 days")
			}
		case s.Wait != nil:
			if !keyRE.MatchString(s.Wait.Signal) || len(s.Wait.Signal) > maxKeyLength {
				add(f+"wait.signal", "a signal name of letters, digits, '_', '.' or '-' is required")
			}
			if s.Wait.Timeout < 0 || time.Duration(s.Wait.Timeout) > maxDuration {
				add(f+"wait.timeout", "must be between 0 and 366 days")
			}
		case s.Workflow != nil:
			if s.Workflow.IdempotencyKey != "" {
				add(f+"workflow.idempotency_key", "a child workflow cannot have an idempotency key")
			}
			s.Workflow.validate(reg, prefix+f+"workflow.", depth+1, errs)
		}
	}
	if cycle := findCycle(d.Steps); cycle != nil {
		add("steps", "dependency cycle: "+strings.Join(cycle, " → "))
	}
}

func validateTask(reg *jobs.Registry, t *TaskSpec, f string, add func(field, msg string)) {
	typ, err := reg.Lookup(t.Type)
	if err == nil && typ.Config.Internal {
		err = fmt.Errorf("%w %q: an internal type", jobs.ErrUnknownType, t.Type)
	}
	if err != nil {
		add(f+"type", err.Error())
		return
	}
	if err := typ.Validate(t.Args); err != nil {
		if ve, ok := err.(*jobs.ValidationError); ok {
			add(f+ve.Field, ve.Message)
		} else {
			add(f+"args", err.Error())
		}
	}
	if t.Queue != "" {
		if err := jobs.ValidateQueueName(t.Queue); err != nil {
			add(f+"queue", err.Error())
		}
	}
	if t.Priority < 0 || t.Priority > 4 {
		add(f+"priority", "must be between 1 and 4")
	}
	if t.Timeout < 0 || time.Duration(t.Timeout) > 24*time.Hour {
		add(f+"timeout", "must be between 0 and 24h")
	}
	if r := t.Retry; r != nil {
		if r.MaxAttempts < 0 || r.MaxAttempts > 1000 {
			add(f+"retry.max_attempts", "must be between 1 and 1000")
		}
		if r.InitialBackoff < 0 || r.MaxBackoff < 0 {
			add(f+"retry", "backoffs must not be negative")
		}
		if r.Multiplier != 0 && r.Multiplier < 1 {
			add(f+"retry.multiplier", "must be at least 1")
		}
		if r.Jitter < 0 || r.Jitter > 1 {
			add(f+"retry.jitter", "must be between 0 and 1")
		}
	}
}

// findCycle returns the keys of one dependency cycle, or nil.
func findCycle(steps []Step) []string {
	deps := make(map[string][]string, len(steps))
	for _, s := range steps {
		if _, dup := deps[s.Key]; !dup { // a duplicate key is reported on its own
			deps[s.Key] = s.DependsOn
		}
	}
	const (
		unvisited = iota
		visiting
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(k string) []string
	visit = func(k string) []string {
		switch state[k] {
		case visiting:
			for i, s := range stack {
				if s == k {
					return append(append([]string{}, stack[i:]...), k)
				}
			}
		case done:
			return nil
		}
		state[k] = visiting
		stack = append(stack, k)
		for _, d := range deps[k] {
			if _, ok := deps[d]; ok {
				if c := visit(d); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[k] = done
		return nil
	}
	for _, s := range steps {
		if c := visit(s.Key); c != nil {
			return c
		}
	}
	return nil
}

func isJSONObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}
