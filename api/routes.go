package api

import (
	"net/http"

	"github.com/switchyard/switchyard/web"
)

// route is one endpoint of the surface.
type route struct {
	method, path string
	scope        Scope
	ops          bool // served by ops-only pods too
	handler      func(s *Server, w http.ResponseWriter, r *http.Request)
}

// routeTable is the whole HTTP surface. The OpenAPI document
// (openapi.yaml) must describe exactly these routes; a test checks both
// ways.
func routeTable(metricsScope Scope) []route {
	return []route{
		{"POST", "/v1/tasks", ScopeWrite, false, (*Server).handleTaskCreate},
		{"POST", "/v1/tasks/batch", ScopeWrite, false, (*Server).handleTaskCreateBatch},
		{"GET", "/v1/tasks", ScopeRead, false, (*Server).handleTaskList},
		{"GET", "/v1/tasks/{id}", ScopeRead, false, (*Server).handleTaskGet},
		{"POST", "/v1/tasks/{id}/cancel", ScopeWrite, false, (*Server).handleTaskCancel},
		{"POST", "/v1/tasks/{id}/retry", ScopeWrite, false, (*Server).handleTaskRetry},
		{"GET", "/v1/task-types", ScopeRead, false, (*Server).handleTaskTypeList},
		{"POST", "/v1/workflows", ScopeWrite, false, (*Server).handleWorkflowStart},
		{"GET", "/v1/executions", ScopeRead, false, (*Server).handleExecutionList},
		{"GET", "/v1/executions/{id}", ScopeRead, false, (*Server).handleExecutionGet},
		{"GET", "/v1/executions/{id}/history", ScopeRead, false, (*Server).handleExecutionHistory},
		{"POST", "/v1/executions/{id}/signals/{name}", ScopeWrite, false, (*Server).handleExecutionSignal},
		{"POST", "/v1/executions/{id}/cancel", ScopeWrite, false, (*Server).handleExecutionCancel},
		{"POST", "/v1/executions/{id}/pause", ScopeWrite, false, (*Server).handleExecutionPause},
		{"POST", "/v1/executions/{id}/resume", ScopeWrite, false, (*Server).handleExecutionResume},
		{"POST", "/v1/executions/{id}/retry", ScopeWrite, false, (*Server).handleExecutionRetry},
		{"GET", "/v1/queues", ScopeRead, false, (*Server).handleQueueList},
		{"POST", "/v1/queues/{name}/pause", ScopeAdmin, false, (*Server).handleQueuePause},
		{"POST", "/v1/queues/{name}/resume", ScopeAdmin, false, (*Server).handleQueueResume},
		{"GET", "/v1/workers", ScopeRead, false, (*Server).handleWorkerList},
		{"GET", "/v1/events", ScopeRead, false, (*Server).handleEvents},
		{"GET", "/v1/whoami", ScopeRead, false, (*Server).handleWhoami},
		{"GET", "/metrics", metricsScope, true, (*Server).handleMetrics},
		{"GET", "/healthz", ScopeNone, true, (*Server).handleHealthz},
		{"GET", "/readyz", ScopeNone, true, (*Server).handleReadyz},
		{"GET", "/openapi.yaml", ScopeNone, true, (*Server).handleOpenAPI},
	}
}

// uiRoutes are the dashboard's patterns (package web): its page at / and
// its assets under /ui/. They are not part of the API: they need no token
// (the page asks for one and sends it to /v1 itself), they are not in
// openapi.yaml, and they are served only where the API is. The OpenAPI
// tests check that they stay out of /v1 and out of the document.
var uiRoutes = []string{"GET /{$}", "GET /ui/"}

// routes builds the router. Every POST goes through the Idempotency-Key
// layer and every body through the size limit.
func (s *Server) routes() http.Handler {
	metricsScope := ScopeNone
	if s.cfg.MetricsAuth {
		metricsScope = ScopeRead
	}
	mux := http.NewServeMux()
	for _, rt := range routeTable(metricsScope) {
		if s.cfg.OpsOnly && !rt.ops {
			continue
		}
		handle := rt.handler
		var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handle(s, w, r) })
		if rt.method == http.MethodPost {
			h = s.idempotent(h)
		}
		h = s.requireScope(rt.scope, h)
		mux.Handle(rt.method+" "+rt.path, h)
	}
	if !s.cfg.OpsOnly {
		dashboard := web.Handler()
		for _, pattern := range uiRoutes {
			mux.Handle(pattern, dashboard)
		}
	}
	// Everything else, /v1 included, is a problem+json 404.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, &notFoundRoute{})
	})
	return s.limitBody(mux)
}

// notFoundRoute is a request for a path the API does not have.
type notFoundRoute struct{}

func (*notFoundRoute) Error() string { return "no such endpoint" }

// limitBody caps request bodies at MaxBodyBytes; reading past it fails
// with *http.MaxBytesError, which maps to 413.
func (s *Server) limitBody(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		h.ServeHTTP(w, r)
	})
}
