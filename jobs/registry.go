package jobs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// TypeConfig is the per-type configuration: where a type's tasks go by
// default and how they run. Zero fields take the defaults of WithDefaults.
type TypeConfig struct {
	// Queue is the default queue for tasks of this type ("default").
	Queue string
	// Priority is the default priority, 1 (first) to 4 (last); default 1.
	Priority int
	// Timeout bounds one attempt of the handler; default 1 minute. A task
	// may override it at enqueue.
	Timeout time.Duration
	// Retry is the retry policy; its MaxAttempts is the default for tasks.
	Retry RetryPolicy
	// Internal types are Switchyard's own (workflow control tasks): not
	// listed by Names and not accepted in raw form from producers.
	Internal bool
}

// Defaults for TypeConfig.
const (
	DefaultQueue    = "default"
	DefaultPriority = 1
	DefaultTimeout  = time.Minute
)

// WithDefaults returns c with unset fields filled in.
func (c TypeConfig) WithDefaults() TypeConfig {
	if c.Queue == "" {
		c.Queue = DefaultQueue
	}
	if c.Priority == 0 {
		c.Priority = DefaultPriority
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	c.Retry = c.Retry.WithDefaults()
	return c
}

// TaskType is a registered task type.
type TaskType struct {
	Name   string
	Config TypeConfig
	// decode checks that raw JSON decodes into the type's Go struct.
	decode func(json.RawMessage) error
}

// Registry holds the task types a process knows, keyed by their stable name.
// Register each type once at start-up; lookups are safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	types map[string]*TaskType
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{types: make(map[string]*TaskType)}
}

var typeNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.:\-]{0,127}$`)

// queueNameRE is the form of a queue name; River stores at most 64 bytes.
var queueNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_\-]{0,63}$`)

// ValidateQueueName checks a queue name: 1 to 64 lowercase letters,
// digits, '_' or '-', starting with a letter or digit.
func ValidateQueueName(name string) error {
	if !queueNameRE.MatchString(name) {
		return fmt.Errorf("queue name %q must be 1-64 lowercase letters, digits, '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// Register adds the task type whose arguments are A. Arguments sent in raw
// JSON form (RawArgs) are checked by decoding them into A, so an HTTP
// producer gets the same validation as a Go one.
func Register[A Args](r *Registry, cfg TypeConfig) error {
	var zero A
	return r.add(zero.TaskType(), cfg, func(raw json.RawMessage) error {
		var a A
		if err := decodeStrict(raw, &a); err != nil {
			return err
		}
		if v, ok := any(a).(Validator); ok {
			return v.Validate()
		}
		return nil
	})
}

// Validator is implemented by argument structs that check their own values
// beyond what JSON decoding does (required fields, ranges). Return a
// *ValidationError to name the field.
type Validator interface {
	Validate() error
}

// MustRegister is Register that panics on error, for start-up code with
// hard-coded types.
func MustRegister[A Args](r *Registry, cfg TypeConfig) {
	if err := Register[A](r, cfg); err != nil {
		panic(err)
	}
}

func (r *Registry) add(name string, cfg TypeConfig, decode func(json.RawMessage) error) error {
	if !typeNameRE.MatchString(name) {
		return fmt.Errorf("register task type %q: name must match %s", name, typeNameRE)
	}
	cfg = cfg.WithDefaults()
	if err := ValidateQueueName(cfg.Queue); err != nil {
		return fmt.Errorf("register task type %q: %w", name, err)
	}
	if cfg.Priority < 1 || cfg.Priority > 4 {
		return fmt.Errorf("register task type %q: priority %d not in 1..4", name, cfg.Priority)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.types[name]; ok {
		return fmt.Errorf("register task type %q: already registered", name)
	}
	r.types[name] = &TaskType{Name: name, Config: cfg, decode: decode}
	return nil
}

// Lookup returns the registered type called name, or ErrUnknownType.
func (r *Registry) Lookup(name string) (*TaskType, error) {
	r.mu.RLock()
	t, ok := r.types[name]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownType, name, strings.Join(r.Names(), ", "))
	}
	return t, nil
}

// Names returns the registered type names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.types))
	for n, t := range r.types {
		if !t.Config.Internal {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// Validate checks raw JSON arguments against the type's Go struct and
// returns a *ValidationError naming the field that does not decode.
func (t *TaskType) Validate(raw json.RawMessage) error {
	if err := t.decode(raw); err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			return ve
		}
		var keys map[string]json.RawMessage
		_ = json.Unmarshal(raw, &keys)
		top := make(map[string]bool, len(keys))
		for k := range keys {
			top[k] = true
		}
		return argsValidationError(err, top)
	}
	return nil
}

// decodeStrict decodes one JSON object into v, rejecting trailing data.
func decodeStrict(raw json.RawMessage, v any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if raw[0] != '{' {
		return errors.New("must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	// Producers get a clear error for a misspelt field instead of a
	// silently ignored one; workers decode leniently (handlers.Typed) so
	// an older worker still runs tasks carrying newer fields.
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	// dec.More is false before a stray '}' or ']': insist on EOF.
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the arguments object")
	}
	return nil
}

// argsValidationError turns a JSON decoding error into a ValidationError
// whose Field is the path of the offending argument.
func argsValidationError(err error, topLevel map[string]bool) *ValidationError {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := "args"
		if typeErr.Field != "" {
			field += "." + typeErr.Field
		}
		return &ValidationError{Field: field, Message: fmt.Sprintf("must be %s, got %s", typeErr.Type, typeErr.Value)}
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		// The error carries no path: name a field only when it is
		// certainly top-level (Validate passes the top-level keys).
		name = strings.Trim(name, `"`)
		if topLevel != nil && topLevel[name] {
			return &ValidationError{Field: "args." + name, Message: "unknown field"}
		}
		return &ValidationError{Field: "args", Message: fmt.Sprintf("unknown field %q", name)}
	}
	var syntaxErr *json.SyntaxError
	if errors.As(err, &syntaxErr) {
		return &ValidationError{Field: "args", Message: "malformed JSON: " + syntaxErr.Error()}
	}
	return &ValidationError{Field: "args", Message: err.Error()}
}
