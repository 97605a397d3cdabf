package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/switchyard/switchyard/db"
	"github.com/switchyard/switchyard/jobs"
	"github.com/switchyard/switchyard/workflow"
)

// problemBase prefixes every problem type URI. The URIs are stable: clients
// may switch on them.
const problemBase = "https://switchyard.dev/problems/"

// Problem is an RFC 9457 problem details body (application/problem+json).
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Errors lists every invalid field of a request.
	Errors []FieldError `json:"errors,omitempty"`
	// KnownTypes lists the registered task types when the type was unknown.
	KnownTypes []string `json:"known_types,omitempty"`
}

// FieldError names one invalid field of a request.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// requestError is bad input that is not about a body field: malformed JSON,
// a bad query parameter or path value. It maps to 400.
type requestError struct {
	kind   string // problem type slug
	detail string
	fields []FieldError
}

func (e *requestError) Error() string { return e.detail }

func badRequest(kind, detail string, fields ...FieldError) error {
	return &requestError{kind: kind, detail: detail, fields: fields}
}

// authError is a failed authentication (401) or authorisation (403).
type authError struct {
	status int
	detail string
}

func (e *authError) Error() string { return e.detail }

// Sentinel errors of the API itself.
var (
	errIdempotencyKeyReused     = errors.New("this Idempotency-Key was used with a different request")
	errIdempotencyKeyInProgress = errors.New("a request with this Idempotency-Key is still in progress; retry shortly")
)

// problemFor maps an error to its problem: the one place domain errors
// become HTTP statuses.
func problemFor(err error, known func() []string) Problem {
	var (
		ve    *jobs.ValidationError
		re    *requestError
		ae    *authError
		mbe   *http.MaxBytesError
		wfErr workflow.ValidationErrors
		fErr  fieldErrors
	)
	switch {
	case errors.As(err, &wfErr):
		return validationProblem(err.Error(), wfErr, known)
	case errors.As(err, &fErr):
		return validationProblem(err.Error(), fErr, known)
	case errors.As(err, &mbe):
		return Problem{Type: problemBase + "body-too-large", Title: "Request body too large", Status: http.StatusRequestEntityTooLarge,
			Detail: fmt.Sprintf("the request body exceeds the limit of %d bytes", mbe.Limit)}
	case errors.As(err, &re):
		return Problem{Type: problemBase + re.kind, Title: "Bad request", Status: http.StatusBadRequest, Detail: re.detail, Errors: re.fields}
	case errors.As(err, &ae):
		title := "Unauthorized"
		if ae.status == http.StatusForbidden {
			title = "Forbidden"
		}
		slug := map[int]string{http.StatusUnauthorized: "unauthorized", http.StatusForbidden: "forbidden"}[ae.status]
		return Problem{Type: problemBase + slug, Title: title, Status: ae.status, Detail: ae.detail}
	case errors.Is(err, jobs.ErrUnknownType):
		p := Problem{Type: problemBase + "unknown-task-type", Title: "Unknown task type", Status: http.StatusUnprocessableEntity,
			Detail: err.Error(), Errors: []FieldError{{Field: "type", Message: "is not a registered task type"}}}
		if known != nil {
			p.KnownTypes = known()
		}
		if errors.As(err, &ve) { // a batch item: keep its index in the field
			p.Errors[0].Field = ve.Field
		}
		return p
	case errors.As(err, &ve):
		return Problem{Type: problemBase + "validation-failed", Title: "Validation failed", Status: http.StatusUnprocessableEntity,
			Detail: ve.Error(), Errors: []FieldError{{Field: ve.Field, Message: ve.Message}}}
	case errors.As(err, new(*notFoundRoute)):
		return Problem{Type: problemBase + "not-found", Title: "Not found", Status: http.StatusNotFound, Detail: "no such endpoint; see /openapi.yaml"}
	case errors.Is(err, jobs.ErrNotFound):
		return Problem{Type: problemBase + "not-found", Title: "Task not found", Status: http.StatusNotFound, Detail: err.Error()}
	case errors.Is(err, workflow.ErrNotFound):
		return Problem{Type: problemBase + "not-found", Title: "Execution not found", Status: http.StatusNotFound, Detail: err.Error()}
	case errors.Is(err, workflow.ErrInvalidState):
		return Problem{Type: problemBase + "invalid-state", Title: "Not valid in the execution's status", Status: http.StatusConflict, Detail: err.Error()}
	case errors.Is(err, workflow.ErrUnknownSignal):
		return Problem{Type: problemBase + "invalid-state", Title: "No step waits for this signal", Status: http.StatusConflict, Detail: err.Error()}
	case errors.Is(err, jobs.ErrQueueNotFound):
		return Problem{Type: problemBase + "not-found", Title: "Queue not found", Status: http.StatusNotFound, Detail: err.Error()}
	case errors.Is(err, jobs.ErrInvalidState):
		return Problem{Type: problemBase + "invalid-state", Title: "Not valid in the task's state", Status: http.StatusConflict, Detail: err.Error()}
	case errors.Is(err, errIdempotencyKeyReused):
		return Problem{Type: problemBase + "idempotency-key-reused", Title: "Idempotency key reused", Status: http.StatusConflict, Detail: err.Error()}
	case errors.Is(err, errIdempotencyKeyInProgress):
		return Problem{Type: problemBase + "idempotency-key-in-progress", Title: "Request in progress", Status: http.StatusConflict, Detail: err.Error()}
	case errors.Is(err, db.ErrUnavailable):
		return Problem{Type: problemBase + "unavailable", Title: "Service unavailable", Status: http.StatusServiceUnavailable,
			Detail: "the database is unreachable; retry later"}
	}
	return Problem{Type: problemBase + "internal", Title: "Internal server error", Status: http.StatusInternalServerError,
		Detail: "an unexpected error occurred; it has been logged"}
}

// validationProblem is the 422 listing every invalid field of a request
// (a workflow definition's problems all at once). When a step names an
// unknown task type, the registered types are listed too.
func validationProblem(detail string, list []*jobs.ValidationError, known func() []string) Problem {
	p := Problem{Type: problemBase + "validation-failed", Title: "Validation failed", Status: http.StatusUnprocessableEntity,
		Detail: detail, Errors: make([]FieldError, len(list))}
	unknownType := false
	for i, e := range list {
		p.Errors[i] = FieldError{Field: e.Field, Message: e.Message}
		unknownType = unknownType || errors.Is(e, jobs.ErrUnknownType) || strings.HasPrefix(e.Message, jobs.ErrUnknownType.Error())
	}
	if unknownType && known != nil {
		p.KnownTypes = known()
	}
	return p
}

// writeError writes err as problem+json. Internal errors are logged, not
// shown: their text may carry details a client should not see.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	p := problemFor(err, s.registryNames)
	if p.Status >= 500 {
		s.logger.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if p.Status == http.StatusServiceUnavailable || errors.Is(err, errIdempotencyKeyInProgress) {
		w.Header().Set("Retry-After", "1")
	}
	if p.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="switchyard"`)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
