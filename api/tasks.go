package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/switchyard/switchyard/jobs"
)

// taskCreateRequest is the body of POST /v1/tasks and an item of a batch.
type taskCreateRequest struct {
	Type           string          `json:"type"`
	Args           json.RawMessage `json:"args"`
	Queue          string          `json:"queue"`
	Priority       int             `json:"priority"`
	RunAt          *time.Time      `json:"run_at"`
	Delay          string          `json:"delay"`
	MaxAttempts    int             `json:"max_attempts"`
	Timeout        string          `json:"timeout"`
	Tags           []string        `json:"tags"`
	IdempotencyKey string          `json:"idempotency_key"`
}

// params converts the request; field names in errors are prefixed.
func (req *taskCreateRequest) params(prefix string) (jobs.EnqueueParams, error) {
	if req.Type == "" {
		return jobs.EnqueueParams{}, &jobs.ValidationError{Field: prefix + "type", Message: "is required"}
	}
	opts := &jobs.EnqueueOptions{
		Queue: req.Queue, Priority: req.Priority, MaxAttempts: req.MaxAttempts,
		Tags: req.Tags, IdempotencyKey: req.IdempotencyKey,
	}
	if req.RunAt != nil {
		opts.RunAt = *req.RunAt
	}
	var err error
	if opts.Delay, err = parseDuration(prefix+"delay", req.Delay); err != nil {
		return jobs.EnqueueParams{}, err
	}
	if opts.Timeout, err = parseDuration(prefix+"timeout", req.Timeout); err != nil {
		return jobs.EnqueueParams{}, err
	}
	return jobs.EnqueueParams{Args: jobs.RawArgs{Type: req.Type, JSON: req.Args}, Options: opts}, nil
}

func parseDuration(field, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, &jobs.ValidationError{Field: field, Message: fmt.Sprintf("must be a duration such as \"90s\" or \"1h30m\", got %q", s)}
	}
	return d, nil
}

// taskResponse is a task as the API shows it.
type taskResponse struct {
	*jobs.Task
	// Timeout is the task's own attempt timeout, if it has one.
	Timeout string `json:"timeout,omitempty"`
}

func taskView(t *jobs.Task) taskResponse {
	v := taskResponse{Task: t}
	if t.Timeout > 0 {
		v.Timeout = t.Timeout.String()
	}
	if t.Args == nil {
		t.Args = json.RawMessage("{}")
	}
	return v
}

func (s *Server) handleTaskCreate(w http.ResponseWriter, r *http.Request) {
	var req taskCreateRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	p, err := req.params("")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.deps.Jobs.Enqueue(r.Context(), p.Args, p.Options)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusAccepted
	if res.Duplicate {
		status = http.StatusOK // the task named by idempotency_key already exists
	}
	w.Header().Set("Location", "/v1/tasks/"+strconv.FormatInt(res.Task.ID, 10))
	writeJSON(w, status, taskView(res.Task))
}

// maxBatch bounds a batch so one request cannot hold a transaction open
// for long.
const maxBatch = 1000

func (s *Server) handleTaskCreateBatch(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Tasks []taskCreateRequest `json:"tasks"`
	}
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(req.Tasks) == 0 || len(req.Tasks) > maxBatch {
		s.writeError(w, r, &jobs.ValidationError{Field: "tasks", Message: fmt.Sprintf("must hold 1 to %d tasks", maxBatch)})
		return
	}
	params := make([]jobs.EnqueueParams, len(req.Tasks))
	for i := range req.Tasks {
		p, err := req.Tasks[i].params(fmt.Sprintf("tasks[%d].", i))
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		params[i] = p
	}
	res, err := s.deps.Jobs.EnqueueMany(r.Context(), params)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]taskResponse, len(res))
	for i, t := range res {
		out[i] = taskView(t.Task)
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"tasks": out})
}

func (s *Server) handleTaskList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := jobs.ListParams{Types: q["type"], Queues: q["queue"], Tags: q["tag"], Cursor: q.Get("cursor")}
	for _, st := range q["state"] {
		state, err := jobs.ParseState(st)
		if err != nil {
			s.writeError(w, r, badRequest("invalid-parameter", err.Error(), FieldError{Field: "state", Message: err.Error()}))
			return
		}
		p.States = append(p.States, state)
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			s.writeError(w, r, badRequest("invalid-parameter", "limit must be an integer", FieldError{Field: "limit", Message: "must be an integer from 1 to 1000"}))
			return
		}
		p.Limit = n
	}
	res, err := s.deps.Jobs.List(r.Context(), p)
	var ve *jobs.ValidationError
	if errors.As(err, &ve) { // a query parameter, not a body field: 400
		err = badRequest("invalid-parameter", ve.Error(), FieldError{Field: ve.Field, Message: ve.Message})
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]taskResponse, len(res.Tasks))
	for i, t := range res.Tasks {
		out[i] = taskView(t)
	}
	writeJSON(w, http.StatusOK, map[string]any{"tasks": out, "next_cursor": res.NextCursor})
}

// taskID parses the {id} path value.
func taskID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, badRequest("invalid-parameter", "task id must be a positive integer", FieldError{Field: "id", Message: "must be a positive integer"})
	}
	return id, nil
}

func (s *Server) handleTaskGet(w http.ResponseWriter, r *http.Request) {
	s.taskAction(w, r, s.deps.Jobs.Get)
}

func (s *Server) handleTaskCancel(w http.ResponseWriter, r *http.Request) {
	s.taskAction(w, r, s.deps.Jobs.Cancel)
}

func (s *Server) handleTaskRetry(w http.ResponseWriter, r *http.Request) {
	s.taskAction(w, r, s.deps.Jobs.Retry)
}

// taskAction runs fn on the task of the path and writes the task.
func (s *Server) taskAction(w http.ResponseWriter, r *http.Request, fn func(context.Context, int64) (*jobs.Task, error)) {
	id, err := taskID(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	t, err := fn(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, taskView(t))
}

func (s *Server) handleTaskTypeList(w http.ResponseWriter, r *http.Request) {
	reg := s.deps.Jobs.Registry()
	type typeView struct {
		Name        string `json:"name"`
		Queue       string `json:"queue"`
		Priority    int    `json:"priority"`
		Timeout     string `json:"timeout"`
		MaxAttempts int    `json:"max_attempts"`
	}
	out := []typeView{}
	for _, name := range reg.Names() {
		t, err := reg.Lookup(name)
		if err != nil {
			continue
		}
		out = append(out, typeView{Name: name, Queue: t.Config.Queue, Priority: t.Config.Priority, Timeout: t.Config.Timeout.String(), MaxAttempts: t.Config.Retry.MaxAttempts})
	}
	writeJSON(w, http.StatusOK, map[string]any{"task_types": out})
}
