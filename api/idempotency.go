package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"time"

	"github.com/switchyard/switchyard/db"
)

// idempotent makes a POST replayable with an Idempotency-Key header: the
// first request's response (success or 4xx) is stored for IdempotencyTTL
// and returned again, with "Idempotent-Replayed: true", to a repeat of the
// same request; the same key with a different method, path or body is
// 409. A 5xx response is not stored, so the client may retry the key.
// Keys are scoped to the token that sent them.
func (s *Server) idempotent(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		if key == "" {
			h.ServeHTTP(w, r)
			return
		}
		if len(key) > 255 {
			s.writeError(w, r, badRequest("invalid-parameter", "Idempotency-Key must be at most 255 bytes", FieldError{Field: "Idempotency-Key", Message: "at most 255 bytes"}))
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		sum := sha256.New()
		io.WriteString(sum, r.Method+" "+r.URL.Path+"\n")
		sum.Write(body)
		hash := sum.Sum(nil)

		ctx := r.Context()
		prin := principal(ctx)
		s.deleteExpiredRequests(ctx)
		prev, err := db.APIRequestBegin(ctx, s.deps.Pool, prin, key, hash, s.cfg.IdempotencyTTL)
		switch {
		case err != nil:
			s.writeError(w, r, err)
			return
		case prev != nil && !bytes.Equal(prev.RequestHash, hash):
			s.writeError(w, r, errIdempotencyKeyReused)
			return
		case prev != nil && prev.Status == 0:
			s.writeError(w, r, errIdempotencyKeyInProgress)
			return
		case prev != nil:
			w.Header().Set("Content-Type", prev.ContentType)
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(prev.Status)
			_, _ = w.Write(prev.Response)
			return
		}

		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		// The request is done; record it even if the client went away.
		ctx = context.WithoutCancel(ctx)
		if rec.status >= 500 {
			err = db.APIRequestDelete(ctx, s.deps.Pool, prin, key)
		} else {
			err = db.APIRequestComplete(ctx, s.deps.Pool, prin, key, rec.status, rec.Header().Get("Content-Type"), rec.body.Bytes())
		}
		if err != nil {
			s.logger.Error("record idempotent response", "key_owner", prin, "err", err)
		}
	})
}

// deleteExpiredRequests deletes expired idempotency records at most once
// a minute per server.
func (s *Server) deleteExpiredRequests(ctx context.Context) {
	now := time.Now().UnixNano()
	last := s.lastExpiry.Load()
	if now-last < int64(time.Minute) || !s.lastExpiry.CompareAndSwap(last, now) {
		return
	}
	if _, err := db.APIRequestDeleteExpired(ctx, s.deps.Pool, s.cfg.IdempotencyTTL); err != nil {
		s.logger.Warn("delete expired idempotency records", "err", err)
	}
}

// recorder passes a response through while keeping a copy.
type recorder struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
	body        bytes.Buffer
}

func (r *recorder) WriteHeader(status int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = status, true
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wroteHeader = true
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}
