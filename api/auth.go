package api

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
)

// Scope is what a token may do. Scopes nest: admin includes write, write
// includes read.
type Scope int

// Scopes, weakest first.
const (
	ScopeNone  Scope = iota // health endpoints: no token needed
	ScopeRead               // GET endpoints
	ScopeWrite              // enqueue, cancel, retry
	ScopeAdmin              // pause and resume queues
)

func (s Scope) String() string {
	return [...]string{"none", "read", "write", "admin"}[s]
}

func parseScope(s string) (Scope, error) {
	switch s {
	case "read":
		return ScopeRead, nil
	case "write":
		return ScopeWrite, nil
	case "admin":
		return ScopeAdmin, nil
	}
	return ScopeNone, fmt.Errorf("unknown scope %q (valid: read, write, admin)", s)
}

// Token is one API credential. Only a hash of the secret is kept.
type Token struct {
	// Name identifies the token in logs and scopes idempotency keys; it is
	// not secret.
	Name  string
	Scope Scope
	hash  [sha256.Size]byte
}

// NewToken returns a token with the given secret.
func NewToken(name string, scope Scope, secret string) Token {
	return Token{Name: name, Scope: scope, hash: sha256.Sum256([]byte(secret))}
}

var tokenNameRE = regexp.MustCompile(`^[A-Za-z0-9_.\-]{1,64}$`)

// ParseTokens reads token entries: one per line or comma-separated, each
// NAME:SCOPE:SECRET with SCOPE one of read, write, admin. Blank lines and
// lines starting with # are ignored. Secrets must be at least 16 bytes.
// Errors name the entry by position, never by secret.
func ParseTokens(r io.Reader) ([]Token, error) {
	var tokens []Token
	names := map[string]bool{}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		for _, entry := range strings.Split(line, ",") {
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			n++
			name, rest, ok1 := strings.Cut(entry, ":")
			scopeName, secret, ok2 := strings.Cut(rest, ":")
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("token entry %d: want NAME:SCOPE:SECRET", n)
			}
			if !tokenNameRE.MatchString(name) {
				return nil, fmt.Errorf("token entry %d: name must match %s", n, tokenNameRE)
			}
			if names[name] {
				return nil, fmt.Errorf("token entry %d: name %q used twice", n, name)
			}
			scope, err := parseScope(scopeName)
			if err != nil {
				return nil, fmt.Errorf("token entry %d (%s): %w", n, name, err)
			}
			if len(secret) < 16 {
				return nil, fmt.Errorf("token entry %d (%s): secret must be at least 16 bytes", n, name)
			}
			names[name] = true
			tokens = append(tokens, NewToken(name, scope, secret))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	return tokens, nil
}

// authenticate returns the token presented by r. Every configured token is
// compared, in constant time, whatever matches, so timing reveals neither a
// secret nor which token matched.
func (s *Server) authenticate(r *http.Request) (*Token, error) {
	h := r.Header.Get("Authorization")
	scheme, secret, ok := strings.Cut(h, " ")
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return nil, &authError{status: http.StatusUnauthorized, detail: "missing bearer token: send Authorization: Bearer <token>"}
	}
	presented := sha256.Sum256([]byte(strings.TrimSpace(secret)))
	var found *Token
	for i := range s.cfg.Tokens {
		if subtle.ConstantTimeCompare(presented[:], s.cfg.Tokens[i].hash[:]) == 1 {
			found = &s.cfg.Tokens[i]
		}
	}
	if found == nil {
		return nil, &authError{status: http.StatusUnauthorized, detail: "invalid bearer token"}
	}
	return found, nil
}

type principalKey struct{}

// principal returns the authenticated token's name ("" for open routes).
func principal(ctx context.Context) string {
	return caller(ctx).Name
}

// caller returns the authenticated token (the zero Token, scope none, for
// open routes).
func caller(ctx context.Context) Token {
	tok, _ := ctx.Value(principalKey{}).(Token)
	return tok
}

// requireScope wraps h so it runs only for a token with at least scope.
func (s *Server) requireScope(scope Scope, h http.Handler) http.Handler {
	if scope == ScopeNone {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, err := s.authenticate(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if tok.Scope < scope {
			s.writeError(w, r, &authError{status: http.StatusForbidden,
				detail: fmt.Sprintf("token %q has scope %s; this endpoint needs %s", tok.Name, tok.Scope, scope)})
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, *tok)))
	})
}

// whoamiResponse tells a client which token it presented: the dashboard
// shows only the actions its scope allows.
type whoamiResponse struct {
	Name  string `json:"name"`
	Scope string `json:"scope"`
}

func (s *Server) handleWhoami(w http.ResponseWriter, r *http.Request) {
	tok := caller(r.Context())
	writeJSON(w, http.StatusOK, whoamiResponse{Name: tok.Name, Scope: tok.Scope.String()})
}
