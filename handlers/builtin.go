package handlers

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/switchyard/switchyard/jobs"
)

// DefaultMaxResponseBody is the default of BuiltinConfig.MaxResponseBody:
// large enough for typical API responses, small enough that a task's stored
// output stays a reasonable database row.
const DefaultMaxResponseBody = 1 << 20

// BuiltinConfig configures the built-in handlers.
type BuiltinConfig struct {
	// HTTPClient sends the requests of http.request. Nil means a dedicated
	// client with transport timeouts built by WithDefaults, never
	// http.DefaultClient: its transport has no dial or TLS handshake timeout
	// and is shared with (and mutable by) the rest of the process. The
	// client's own Timeout should be zero or generous: each request is bounded
	// by its task's "timeout" argument instead. A client whose CheckRedirect
	// is nil follows at most 10 redirects, then fails the task permanently.
	HTTPClient *http.Client
	// MaxResponseBody is how many bytes of a 2xx response body http.request
	// keeps in its output (default DefaultMaxResponseBody). A longer body is
	// cut and the output flagged "truncated", so one huge response cannot
	// bloat the task table.
	MaxResponseBody int64
}

// WithDefaults returns c with unset fields filled in. Each call builds a new
// HTTP client when HTTPClient is nil, so call it once and keep the result.
func (c BuiltinConfig) WithDefaults() BuiltinConfig {
	if c.HTTPClient == nil {
		c.HTTPClient = newDefaultHTTPClient()
	}
	if c.MaxResponseBody <= 0 {
		c.MaxResponseBody = DefaultMaxResponseBody
	}
	return c
}

// newDefaultHTTPClient mirrors http.DefaultTransport's settings without
// sharing its connection pool. There is no client-wide or response-header
// timeout because each request carries its own (up to MaxHTTPTimeout).
func newDefaultHTTPClient() *http.Client {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           dialer.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          100,
			MaxIdleConnsPerHost:   10,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
	}
}

// HTTPRequestRetryPolicy returns the retry policy RegisterBuiltins gives
// http.request (a function, not a variable, so no caller can change it for
// everyone). It needs no Classify: the handler itself decides, returning
// jobs.Permanent for responses that must not be retried and jobs.RetryAfter
// when the server says when to come back.
func HTTPRequestRetryPolicy() jobs.RetryPolicy {
	return jobs.RetryPolicy{
		MaxAttempts:    10,
		InitialBackoff: time.Second,
		Multiplier:     2,
		MaxBackoff:     5 * time.Minute,
		Jitter:         0.1,
	}
}

// attemptSlack is added to a built-in type's longest legitimate run time to
// form its attempt timeout, so that the handler's own limit (the sleep's
// duration, the request's timeout) fires first and is reported as such.
const attemptSlack = time.Minute

// RegisterBuiltins registers the task types noop, sleep and http.request in
// reg and their handlers in mux. It checks for name clashes before
// registering anything, so on error neither reg nor mux has been changed
// (unless they are being modified concurrently).
func RegisterBuiltins(reg *jobs.Registry, mux *Mux, cfg BuiltinConfig) error {
	if reg == nil || mux == nil {
		return errors.New("register builtins: registry and mux are required")
	}
	cfg = cfg.WithDefaults()

	builtins := []struct {
		name     string
		register func() error
		handler  Handler
	}{
		{
			name:     NoopArgs{}.TaskType(),
			register: func() error { return jobs.Register[NoopArgs](reg, jobs.TypeConfig{}) },
			handler:  NewNoopHandler(),
		},
		{
			name: SleepArgs{}.TaskType(),
			register: func() error {
				return jobs.Register[SleepArgs](reg, jobs.TypeConfig{Timeout: MaxSleep + attemptSlack})
			},
			handler: NewSleepHandler(),
		},
		{
			name: HTTPRequestArgs{}.TaskType(),
			register: func() error {
				return jobs.Register[HTTPRequestArgs](reg, jobs.TypeConfig{
					Timeout: MaxHTTPTimeout + attemptSlack,
					Retry:   HTTPRequestRetryPolicy(),
				})
			},
			handler: NewHTTPRequestHandler(cfg),
		},
	}

	for _, b := range builtins {
		if _, err := reg.Lookup(b.name); err == nil {
			return fmt.Errorf("register builtins: task type %q already registered", b.name)
		}
		if _, ok := mux.Handler(b.name); ok {
			return fmt.Errorf("register builtins: task type %q already has a handler", b.name)
		}
	}
	for _, b := range builtins {
		if err := b.register(); err != nil {
			return fmt.Errorf("register builtins: %w", err)
		}
		mux.Handle(b.name, b.handler)
	}
	return nil
}
