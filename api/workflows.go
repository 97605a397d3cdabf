package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/switchyard/switchyard/jobs"
	"github.com/switchyard/switchyard/workflow"
)

// handleWorkflowStart starts an execution of the workflow definition in
// the body: 202 with the execution and its steps, or 200 with the
// execution an earlier start with the definition's idempotency_key made.
// An invalid definition is 422 listing every problem; nothing is written.
func (s *Server) handleWorkflowStart(w http.ResponseWriter, r *http.Request) {
	var def workflow.Definition
	if err := decodeBody(r, &def); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.deps.Workflows.Start(r.Context(), &def)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	exec := res.Execution
	// The steps, as they are right after the start. The execution exists
	// now whatever happens: should this read fail, answer with what Start
	// returned rather than an error the client would retry.
	if full, err := s.deps.Workflows.Get(r.Context(), exec.ID); err == nil {
		exec = full
	} else {
		s.logger.Warn("read started execution", "execution_id", exec.ID, "err", err)
	}
	status := http.StatusAccepted
	if res.Existing {
		status = http.StatusOK // the definition's idempotency_key started it before
	}
	w.Header().Set("Location", "/v1/executions/"+strconv.FormatInt(exec.ID, 10))
	writeJSON(w, status, executionView(exec))
}

// executionView is e as the API shows it: input is always an object.
func executionView(e *workflow.Execution) *workflow.Execution {
	if e.Input == nil {
		e.Input = json.RawMessage("{}")
	}
	return e
}

func (s *Server) handleExecutionList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := workflow.ListParams{Statuses: q["status"], Name: q.Get("name"), Cursor: q.Get("cursor")}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			s.writeError(w, r, badRequest("invalid-parameter", "limit must be an integer from 1 to 500", FieldError{Field: "limit", Message: "must be an integer from 1 to 500"}))
			return
		}
		p.Limit = n
	}
	res, err := s.deps.Workflows.List(r.Context(), p)
	if err != nil {
		s.writeError(w, r, asParameterError(err))
		return
	}
	out := make([]*workflow.Execution, len(res.Executions))
	for i, e := range res.Executions {
		out[i] = executionView(e)
	}
	writeJSON(w, http.StatusOK, map[string]any{"executions": out, "next_cursor": res.NextCursor})
}

// asParameterError turns a validation error about a query parameter or
// path value into the 400 it is; other errors pass unchanged.
func asParameterError(err error) error {
	var ve *jobs.ValidationError
	if errors.As(err, &ve) {
		return badRequest("invalid-parameter", ve.Error(), FieldError{Field: ve.Field, Message: ve.Message})
	}
	return err
}

// executionID parses the {id} path value.
func executionID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, badRequest("invalid-parameter", "execution id must be a positive integer", FieldError{Field: "id", Message: "must be a positive integer"})
	}
	return id, nil
}

func (s *Server) handleExecutionGet(w http.ResponseWriter, r *http.Request) {
	s.executionAction(w, r, s.deps.Workflows.Get)
}

func (s *Server) handleExecutionCancel(w http.ResponseWriter, r *http.Request) {
	s.executionAction(w, r, s.deps.Workflows.Cancel)
}

func (s *Server) handleExecutionPause(w http.ResponseWriter, r *http.Request) {
	s.executionAction(w, r, s.deps.Workflows.Pause)
}

func (s *Server) handleExecutionResume(w http.ResponseWriter, r *http.Request) {
	s.executionAction(w, r, s.deps.Workflows.Resume)
}

func (s *Server) handleExecutionRetry(w http.ResponseWriter, r *http.Request) {
	s.executionAction(w, r, s.deps.Workflows.Retry)
}

// executionAction runs fn on the execution of the path and writes the
// execution it returns.
func (s *Server) executionAction(w http.ResponseWriter, r *http.Request, fn func(context.Context, int64) (*workflow.Execution, error)) {
	id, err := executionID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	exec, err := fn(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, executionView(exec))
}

// Bounds of a history page.
const (
	defaultHistoryLimit = 500
	maxHistoryLimit     = 5000
)

func (s *Server) handleExecutionHistory(w http.ResponseWriter, r *http.Request) {
	id, err := executionID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	var after int64
	if a := q.Get("after"); a != "" {
		if after, err = strconv.ParseInt(a, 10, 64); err != nil || after < 0 {
			s.writeError(w, r, badRequest("invalid-parameter", "after must be an event id", FieldError{Field: "after", Message: "must be a non-negative integer: the id of the last event seen"}))
			return
		}
	}
	limit := defaultHistoryLimit
	if l := q.Get("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit < 1 || limit > maxHistoryLimit {
			s.writeError(w, r, badRequest("invalid-parameter", "limit must be an integer from 1 to 5000", FieldError{Field: "limit", Message: "must be an integer from 1 to 5000"}))
			return
		}
	}
	evs, err := s.deps.Workflows.History(r.Context(), id, after, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if evs == nil {
		evs = []workflow.Event{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": evs})
}

// signalRequest is the (optional) body of POST
// /v1/executions/{id}/signals/{name}.
type signalRequest struct {
	// Payload becomes the output of the wait step the signal completes.
	Payload json.RawMessage `json:"payload"`
	// IdempotencyKey deduplicates the signal within its execution; the
	// request's Idempotency-Key header is used when it is absent.
	IdempotencyKey string `json:"idempotency_key"`
}

func (s *Server) handleExecutionSignal(w http.ResponseWriter, r *http.Request) {
	id, err := executionID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.writeError(w, r, err) // *http.MaxBytesError → 413
		return
	}
	var req signalRequest
	if len(bytes.TrimSpace(body)) > 0 {
		if err := decodeJSON(body, &req); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	key := req.IdempotencyKey
	if key == "" {
		key = r.Header.Get("Idempotency-Key") // at most 255 bytes: checked by the idempotency layer
	} else if len(key) > 255 {
		s.writeError(w, r, &jobs.ValidationError{Field: "idempotency_key", Message: "at most 255 bytes"})
		return
	}
	res, err := s.deps.Workflows.Signal(r.Context(), id, r.PathValue("name"), req.Payload, key)
	var ve *jobs.ValidationError
	if errors.As(err, &ve) && ve.Field == "name" { // the path's signal name
		err = asParameterError(err)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, res)
}
