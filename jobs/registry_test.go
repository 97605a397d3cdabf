package jobs_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchyard/switchyard/jobs"
)

// Argument types shared by this package's tests.

// countArgs is the main test type.
type countArgs struct {
	Count int    `json:"count"`
	Name  string `json:"name,omitempty"`
	Inner struct {
		Level int `json:"level"`
	} `json:"inner"`
}

func (countArgs) TaskType() string { return "test.count" }

// otherArgs is a second type with a zero TypeConfig.
type otherArgs struct {
	Note string `json:"note"`
}

func (otherArgs) TaskType() string { return "test.other" }

// errEmailRequired is what emailArgs.Validate returns for a missing address;
// a package variable so tests can check it comes back unchanged.
var errEmailRequired = &jobs.ValidationError{Field: "args.email", Message: "is required"}

// emailArgs checks its own values (jobs.Validator).
type emailArgs struct {
	Email string `json:"email"`
}

func (emailArgs) TaskType() string { return "test.email" }

func (a emailArgs) Validate() error {
	switch {
	case a.Email == "":
		return errEmailRequired
	case a.Email == "wrapped":
		return fmt.Errorf("check email: %w", &jobs.ValidationError{Field: "args.email", Message: "wrapped"})
	case !strings.Contains(a.Email, "@"):
		return errors.New("not an address")
	}
	return nil
}

// Types with invalid names.
type (
	digitNameArgs struct{}
	spaceNameArgs struct{}
	slashNameArgs struct{}
	longNameArgs  struct{}
	emptyNameArgs struct{}
)

func (digitNameArgs) TaskType() string { return "1task" }
func (spaceNameArgs) TaskType() string { return "has space" }
func (slashNameArgs) TaskType() string { return "a/b" }
func (longNameArgs) TaskType() string  { return "a" + strings.Repeat("b", 128) }
func (emptyNameArgs) TaskType() string { return "" }

// Types with unusual but valid names.
type (
	punctNameArgs struct{}
	maxNameArgs   struct{}
)

func (punctNameArgs) TaskType() string { return "Mail.send:v2-beta_1" }
func (maxNameArgs) TaskType() string   { return "a" + strings.Repeat("b", 127) }

// requireValidationError asserts that err is (or wraps) a *ValidationError
// for field and returns it.
func requireValidationError(t *testing.T, err error, field string) *jobs.ValidationError {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil; want a *jobs.ValidationError for %q", field)
	}
	var ve *jobs.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v (%T); want a *jobs.ValidationError for %q", err, err, field)
	}
	if ve.Field != field {
		t.Fatalf("ValidationError.Field = %q (%v); want %q", ve.Field, ve, field)
	}
	if ve.Message == "" {
		t.Errorf("ValidationError for %q has no message", field)
	}
	return ve
}

func TestRegister(t *testing.T) {
	t.Parallel()

	t.Run("TypedArgs", func(t *testing.T) {
		t.Parallel()
		reg := jobs.NewRegistry()
		cfg := jobs.TypeConfig{Queue: "mail", Priority: 3, Timeout: 5 * time.Second, Retry: jobs.RetryPolicy{MaxAttempts: 4}}
		if err := jobs.Register[countArgs](reg, cfg); err != nil {
			t.Fatalf("Register: %v", err)
		}
		typ, err := reg.Lookup("test.count")
		if err != nil {
			t.Fatalf("Lookup: %v", err)
		}
		if typ.Name != "test.count" {
			t.Errorf("Name = %q; want test.count", typ.Name)
		}
		c := typ.Config
		if c.Queue != "mail" || c.Priority != 3 || c.Timeout != 5*time.Second || c.Retry.MaxAttempts != 4 {
			t.Errorf("Config = %+v; want queue mail, priority 3, timeout 5s, max attempts 4", c)
		}
		// Unset retry fields take their defaults.
		if c.Retry.InitialBackoff != jobs.DefaultInitialBackoff || c.Retry.MaxBackoff != jobs.DefaultMaxBackoff {
			t.Errorf("Retry = %+v; want default backoffs filled in", c.Retry)
		}
		if got := reg.Names(); len(got) != 1 || got[0] != "test.count" {
			t.Errorf("Names() = %v; want [test.count]", got)
		}
	})

	t.Run("ZeroConfigTakesDefaults", func(t *testing.T) {
		t.Parallel()
		reg := jobs.NewRegistry()
		jobs.MustRegister[otherArgs](reg, jobs.TypeConfig{})
		typ, err := reg.Lookup("test.other")
		if err != nil {
			t.Fatalf("Lookup: %v", err)
		}
		c := typ.Config
		if c.Queue != jobs.DefaultQueue || c.Priority != jobs.DefaultPriority || c.Timeout != jobs.DefaultTimeout || c.Retry.MaxAttempts != jobs.DefaultMaxAttempts {
			t.Errorf("Config = %+v; want the defaults", c)
		}
	})

	t.Run("ValidUnusualNames", func(t *testing.T) {
		t.Parallel()
		reg := jobs.NewRegistry()
		if err := jobs.Register[punctNameArgs](reg, jobs.TypeConfig{}); err != nil {
			t.Errorf("Register %q: %v", punctNameArgs{}.TaskType(), err)
		}
		if err := jobs.Register[maxNameArgs](reg, jobs.TypeConfig{}); err != nil {
			t.Errorf("Register 128-character name: %v", err)
		}
		if got := len(reg.Names()); got != 2 {
			t.Errorf("%d types registered; want 2", got)
		}
	})

	t.Run("Duplicate", func(t *testing.T) {
		t.Parallel()
		reg := jobs.NewRegistry()
		if err := jobs.Register[countArgs](reg, jobs.TypeConfig{Queue: "first"}); err != nil {
			t.Fatalf("first Register: %v", err)
		}
		err := jobs.Register[countArgs](reg, jobs.TypeConfig{Queue: "second"})
		if err == nil {
			t.Fatal("second Register succeeded; want an error")
		}
		if !strings.Contains(err.Error(), "test.count") || !strings.Contains(err.Error(), "already registered") {
			t.Errorf("error %q should name the type and say it is already registered", err)
		}
		// The first registration stays in force.
		typ, err := reg.Lookup("test.count")
		if err != nil {
			t.Fatalf("Lookup: %v", err)
		}
		if typ.Config.Queue != "first" {
			t.Errorf("Queue = %q; want the first registration's", typ.Config.Queue)
		}
	})

	t.Run("MustRegisterPanicsOnDuplicate", func(t *testing.T) {
		t.Parallel()
		reg := jobs.NewRegistry()
		jobs.MustRegister[countArgs](reg, jobs.TypeConfig{})
		defer func() {
			if recover() == nil {
				t.Error("MustRegister of a duplicate did not panic")
			}
		}()
		jobs.MustRegister[countArgs](reg, jobs.TypeConfig{})
	})

	invalidNames := []struct {
		name     string
		register func(*jobs.Registry) error
	}{
		{"Empty", func(r *jobs.Registry) error { return jobs.Register[emptyNameArgs](r, jobs.TypeConfig{}) }},
		{"RawArgsZero", func(r *jobs.Registry) error { return jobs.Register[jobs.RawArgs](r, jobs.TypeConfig{}) }},
		{"LeadingDigit", func(r *jobs.Registry) error { return jobs.Register[digitNameArgs](r, jobs.TypeConfig{}) }},
		{"Space", func(r *jobs.Registry) error { return jobs.Register[spaceNameArgs](r, jobs.TypeConfig{}) }},
		{"Slash", func(r *jobs.Registry) error { return jobs.Register[slashNameArgs](r, jobs.TypeConfig{}) }},
		{"TooLong", func(r *jobs.Registry) error { return jobs.Register[longNameArgs](r, jobs.TypeConfig{}) }},
	}
	for _, tt := range invalidNames {
		t.Run("InvalidTypeName_"+tt.name, func(t *testing.T) {
			t.Parallel()
			reg := jobs.NewRegistry()
			if err := tt.register(reg); err == nil {
				t.Fatal("Register succeeded; want an error")
			}
			if got := reg.Names(); len(got) != 0 {
				t.Errorf("Names() = %v after a rejected Register; want none", got)
			}
		})
	}

	invalidConfigs := []struct {
		name    string
		cfg     jobs.TypeConfig
		mention string
	}{
		{"QueueUpperCase", jobs.TypeConfig{Queue: "Mail"}, "queue"},
		{"QueueSpace", jobs.TypeConfig{Queue: "mail queue"}, "queue"},
		{"QueueLeadingDash", jobs.TypeConfig{Queue: "-mail"}, "queue"},
		{"QueueDot", jobs.TypeConfig{Queue: "mail.out"}, "queue"},
		{"QueueTooLong", jobs.TypeConfig{Queue: strings.Repeat("q", 129)}, "queue"},
		{"PriorityTooHigh", jobs.TypeConfig{Priority: 5}, "priority"},
		{"PriorityNegative", jobs.TypeConfig{Priority: -1}, "priority"},
	}
	for _, tt := range invalidConfigs {
		t.Run("InvalidConfig_"+tt.name, func(t *testing.T) {
			t.Parallel()
			reg := jobs.NewRegistry()
			err := jobs.Register[countArgs](reg, tt.cfg)
			if err == nil {
				t.Fatalf("Register with %+v succeeded; want an error", tt.cfg)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("error %q does not mention %s", err, tt.mention)
			}
			if _, err := reg.Lookup("test.count"); !errors.Is(err, jobs.ErrUnknownType) {
				t.Errorf("Lookup after a rejected Register: err = %v; want ErrUnknownType", err)
			}
		})
	}

	t.Run("ValidQueueAndPriorityBounds", func(t *testing.T) {
		t.Parallel()
		reg := jobs.NewRegistry()
		if err := jobs.Register[countArgs](reg, jobs.TypeConfig{Queue: "0-mail_out", Priority: 4}); err != nil {
			t.Errorf("Register: %v", err)
		}
		if err := jobs.Register[otherArgs](reg, jobs.TypeConfig{Queue: strings.Repeat("q", 64), Priority: 1}); err != nil {
			t.Errorf("Register with a 64-character queue: %v", err)
		}
		// River stores at most 64 bytes of a queue name.
		if err := jobs.Register[longNameArgs](reg, jobs.TypeConfig{Queue: strings.Repeat("q", 65)}); err == nil {
			t.Error("Register with a 65-character queue: want an error")
		}
	})
}

func TestRegistryLookupUnknown(t *testing.T) {
	t.Parallel()

	reg := jobs.NewRegistry()
	jobs.MustRegister[countArgs](reg, jobs.TypeConfig{})
	jobs.MustRegister[otherArgs](reg, jobs.TypeConfig{})

	typ, err := reg.Lookup("test.missing")
	if typ != nil {
		t.Errorf("Lookup returned %+v; want nil", typ)
	}
	if !errors.Is(err, jobs.ErrUnknownType) {
		t.Fatalf("err = %v; want it to wrap ErrUnknownType", err)
	}
	for _, want := range []string{"test.missing", "test.count", "test.other"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}

	t.Run("EmptyRegistry", func(t *testing.T) {
		t.Parallel()
		_, err := jobs.NewRegistry().Lookup("x")
		if !errors.Is(err, jobs.ErrUnknownType) {
			t.Errorf("err = %v; want ErrUnknownType", err)
		}
	})
}

func TestTaskTypeValidate(t *testing.T) {
	t.Parallel()

	reg := jobs.NewRegistry()
	jobs.MustRegister[countArgs](reg, jobs.TypeConfig{})
	jobs.MustRegister[emailArgs](reg, jobs.TypeConfig{})
	countType, err := reg.Lookup("test.count")
	if err != nil {
		t.Fatal(err)
	}
	emailType, err := reg.Lookup("test.email")
	if err != nil {
		t.Fatal(err)
	}

	valid := []struct {
		name string
		raw  string
	}{
		{"Full", `{"count":3,"name":"x","inner":{"level":2}}`},
		{"EmptyObject", `{}`},
		{"EmptyInput", ``},
		{"Whitespace", "  \n\t"},
		{"TrailingWhitespace", "{\"count\":1}\n  "},
	}
	for _, tt := range valid {
		t.Run("Valid_"+tt.name, func(t *testing.T) {
			t.Parallel()
			if err := countType.Validate(json.RawMessage(tt.raw)); err != nil {
				t.Errorf("Validate(%q) = %v; want nil", tt.raw, err)
			}
		})
	}

	invalid := []struct {
		name  string
		raw   string
		field string
	}{
		{"WrongFieldType", `{"count":"x"}`, "args.count"},
		{"WrongFieldTypeFloat", `{"count":1.5}`, "args.count"},
		{"WrongSecondField", `{"count":1,"name":7}`, "args.name"},
		{"WrongNestedFieldType", `{"inner":{"level":"high"}}`, "args.inner.level"},
		{"UnknownField", `{"count":1,"bogus":2}`, "args.bogus"},
		{"NotAnObject", `[1,2]`, "args"},
		{"StringTopLevel", `"hello"`, "args"},
		{"Malformed", `{"count":`, "args"},
		{"MalformedGarbage", `not json`, "args"},
		{"MalformedUnquotedKey", `{count:1}`, "args"},
		{"TrailingObject", `{"count":1} {"count":2}`, "args"},
		{"TrailingGarbage", `{"count":1} x`, "args"},
		{"TrailingNumber", `{"count":1} 2`, "args"},
		// Decoder.More reports false before a closing bracket, so these
		// need their own check.
		{"TrailingCloseBrace", `{"count":1}}`, "args"},
		{"TrailingCloseBracket", `{"count":1}]`, "args"},
	}
	for _, tt := range invalid {
		t.Run("Invalid_"+tt.name, func(t *testing.T) {
			t.Parallel()
			requireValidationError(t, countType.Validate(json.RawMessage(tt.raw)), tt.field)
		})
	}

	// A misspelt nested field must not be reported under a wrong path:
	// "args.nope" names a top-level field. The full path, or just "args"
	// with the name in the message, are both truthful.
	t.Run("Invalid_UnknownNestedField", func(t *testing.T) {
		t.Parallel()
		err := countType.Validate(json.RawMessage(`{"inner":{"nope":1}}`))
		var ve *jobs.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("err = %v (%T); want a *jobs.ValidationError", err, err)
		}
		switch ve.Field {
		case "args.inner.nope":
		case "args":
			if !strings.Contains(ve.Message, "nope") {
				t.Errorf("Message = %q; want it to name the unknown field nope", ve.Message)
			}
		default:
			t.Errorf("Field = %q (%v); want args.inner.nope (or args)", ve.Field, ve)
		}
	})

	t.Run("ValidatorErrorReturnedUnchanged", func(t *testing.T) {
		t.Parallel()
		err := emailType.Validate(json.RawMessage(`{"email":""}`))
		var ve *jobs.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("err = %v (%T); want *jobs.ValidationError", err, err)
		}
		if ve != errEmailRequired {
			t.Errorf("got %#v; want the Validator's own *ValidationError %p unchanged", ve, errEmailRequired)
		}
	})

	t.Run("ValidatorWrappedValidationErrorUnwrapped", func(t *testing.T) {
		t.Parallel()
		ve := requireValidationError(t, emailType.Validate(json.RawMessage(`{"email":"wrapped"}`)), "args.email")
		if ve.Message != "wrapped" {
			t.Errorf("Message = %q; want the Validator's %q", ve.Message, "wrapped")
		}
	})

	t.Run("ValidatorPlainErrorBecomesArgsField", func(t *testing.T) {
		t.Parallel()
		ve := requireValidationError(t, emailType.Validate(json.RawMessage(`{"email":"nobody"}`)), "args")
		if !strings.Contains(ve.Message, "not an address") {
			t.Errorf("Message = %q; want the Validator's error text", ve.Message)
		}
	})

	t.Run("ValidatorPasses", func(t *testing.T) {
		t.Parallel()
		if err := emailType.Validate(json.RawMessage(`{"email":"a@example.com"}`)); err != nil {
			t.Errorf("Validate = %v; want nil", err)
		}
	})

	t.Run("DecodeErrorBeforeValidator", func(t *testing.T) {
		t.Parallel()
		requireValidationError(t, emailType.Validate(json.RawMessage(`{"email":5}`)), "args.email")
	})
}
