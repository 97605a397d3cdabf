package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/switchyard/switchyard/metrics"
)

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	metrics.Handler(s.deps.Metrics, s.logger).ServeHTTP(w, r)
}

// handleHealthz is liveness: the process serves HTTP. It stays true during
// shutdown so the pod is not killed while it drains.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

// handleReadyz is readiness: false while shutting down or while a
// dependency the pod needs is unreachable.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	var problems []error
	if !s.started.Load() {
		problems = append(problems, errors.New("starting"))
	}
	if s.shuttingDown.Load() {
		problems = append(problems, errors.New("shutting down"))
	}
	if s.deps.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.deps.Ready(ctx); err != nil {
			problems = append(problems, err)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if len(problems) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, errors.Join(problems...))
		return
	}
	fmt.Fprintln(w, "ready")
}

func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(OpenAPI)
}
