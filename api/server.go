// Package api is Switchyard's HTTP API: tasks, workflow executions, queues,
// workers and a Server-Sent Events stream under /v1, plus the operational
// endpoints (/metrics, /healthz, /readyz, /openapi.yaml). routes.go holds
// the whole surface; problem.go maps every domain error to HTTP in one
// function.
package api

import (
	"context"
	_ "embed"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard/switchyard/events"
	"github.com/switchyard/switchyard/jobs"
	"github.com/switchyard/switchyard/workflow"
)

// OpenAPI is the API's OpenAPI 3.1 document, the contract of this package.
//
//go:embed openapi.yaml
var OpenAPI []byte

// Config configures the Server. Zero fields take WithDefaults' values.
type Config struct {
	// Tokens are the accepted bearer tokens. The /v1 API refuses to start
	// without any.
	Tokens []Token
	// MaxBodyBytes limits request bodies; default 1 MiB.
	MaxBodyBytes int64
	// MetricsAuth makes /metrics require a read token; default open.
	MetricsAuth bool
	// IdempotencyTTL is how long an Idempotency-Key's response is kept for
	// replay; default 24h.
	IdempotencyTTL time.Duration
	// OpsOnly serves only /metrics, /healthz, /readyz and /openapi.yaml (a
	// workers-only pod).
	OpsOnly bool
	// SSEHeartbeat is the interval of keep-alive comments on /v1/events;
	// default 15s.
	SSEHeartbeat time.Duration
}

// Defaults.
const (
	DefaultMaxBodyBytes   = 1 << 20
	DefaultIdempotencyTTL = 24 * time.Hour
	DefaultSSEHeartbeat   = 15 * time.Second
)

// WithDefaults returns c with unset fields filled in.
func (c Config) WithDefaults() Config {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.IdempotencyTTL <= 0 {
		c.IdempotencyTTL = DefaultIdempotencyTTL
	}
	if c.SSEHeartbeat <= 0 {
		c.SSEHeartbeat = DefaultSSEHeartbeat
	}
	return c
}

// eventSource is where /v1/events reads task state changes from.
type eventSource interface {
	Subscribe() (<-chan events.Batch, func())
}

// Deps are the Server's collaborators, built once in main's run.
type Deps struct {
	Jobs *jobs.Client
	Pool *pgxpool.Pool
	// Workflows serves /v1/workflows and /v1/executions.
	Workflows *workflow.Engine
	// Events feeds /v1/events.
	Events eventSource
	// Metrics is exposed at /metrics.
	Metrics prometheus.Gatherer
	// Ready reports whether this pod can serve (Postgres, and Redis in
	// strict guard mode); nil means always ready.
	Ready func(context.Context) error
	// PodStaleAfter is how old a pod's last heartbeat may be for it to be
	// listed as alive; default 3 × 5s.
	PodStaleAfter time.Duration
	Logger        *slog.Logger
}

// Server serves the HTTP API.
type Server struct {
	cfg          Config
	deps         Deps
	logger       *slog.Logger
	handler      http.Handler
	started      atomic.Bool // set by MarkStarted: the pod's components run
	shuttingDown atomic.Bool
	lastExpiry   atomic.Int64  // unix nanos of the last idempotency cleanup
	ready        chan struct{} // closed when shutting down: ends SSE streams
}

// New validates cfg and builds the Server.
func New(cfg Config, deps Deps) (*Server, error) {
	cfg = cfg.WithDefaults()
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.PodStaleAfter <= 0 {
		deps.PodStaleAfter = 15 * time.Second
	}
	if deps.Metrics == nil {
		return nil, errors.New("api: Deps.Metrics is required")
	}
	if !cfg.OpsOnly {
		if len(cfg.Tokens) == 0 {
			return nil, errors.New("api: no API tokens configured: set SWITCHYARD_API_TOKENS or SWITCHYARD_API_TOKENS_FILE (NAME:SCOPE:SECRET), or run without the API (--api=false)")
		}
		if deps.Jobs == nil || deps.Pool == nil || deps.Events == nil || deps.Workflows == nil {
			return nil, errors.New("api: Deps.Jobs, Deps.Pool, Deps.Events and Deps.Workflows are required")
		}
	}
	s := &Server{cfg: cfg, deps: deps, logger: deps.Logger, ready: make(chan struct{})}
	s.handler = s.routes()
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// MarkStarted makes /readyz succeed (when its checks pass): call it once
// every component of the pod has started. Until then the pod is not ready,
// so no traffic arrives before its workers and event listener run.
func (s *Server) MarkStarted() { s.started.Store(true) }

// BeginShutdown makes /readyz fail and ends open event streams; call it
// first when the pod is stopping, so load balancers drain it.
func (s *Server) BeginShutdown() {
	if s.shuttingDown.CompareAndSwap(false, true) {
		close(s.ready)
	}
}

// registryNames lists the known task types for problems; nil-safe for an
// ops-only server.
func (s *Server) registryNames() []string {
	if s.deps.Jobs == nil {
		return nil
	}
	return s.deps.Jobs.Registry().Names()
}
