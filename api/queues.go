package api

import (
	"net/http"

	"github.com/switchyard/switchyard/jobs"
)

func (s *Server) handleQueueList(w http.ResponseWriter, r *http.Request) {
	queues, err := s.deps.Jobs.QueueList(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"queues": queues})
}

func (s *Server) handleQueuePause(w http.ResponseWriter, r *http.Request) {
	s.queueAction(w, r, true)
}

func (s *Server) handleQueueResume(w http.ResponseWriter, r *http.Request) {
	s.queueAction(w, r, false)
}

// queueAction pauses or resumes the queue of the path and writes its state.
func (s *Server) queueAction(w http.ResponseWriter, r *http.Request, pause bool) {
	name := r.PathValue("name")
	if err := jobs.ValidateQueueName(name); err != nil {
		s.writeError(w, r, badRequest("invalid-parameter", "invalid queue name", FieldError{Field: "name", Message: err.Error()}))
		return
	}
	op := s.deps.Jobs.QueueResume
	if pause {
		op = s.deps.Jobs.QueuePause
	}
	if err := op(r.Context(), name); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": name, "paused": pause})
}
