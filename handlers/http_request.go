package handlers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/jobs"
)

// Limits of http.request.
const (
	// DefaultHTTPTimeout bounds a request whose args set no timeout.
	DefaultHTTPTimeout = 30 * time.Second
	// MaxHTTPTimeout is the longest timeout a request may ask for.
	// RegisterBuiltins gives http.request an attempt timeout a little longer,
	// so the request's own timeout fires first and is classed "timeout".
	MaxHTTPTimeout = 10 * time.Minute
	// MaxRetryAfter caps the delay a server can ask for with Retry-After, so a
	// misconfigured server cannot park a task for days.
	MaxRetryAfter = time.Hour
	// MaxRedirects is how many redirects a request follows when the client
	// has no redirect policy of its own (the same limit as net/http's).
	MaxRedirects = 10
)

// Failure classes of http.request, used in retry_on, no_retry_on and
// HTTPRequestError.Class, besides status families ("4xx") and codes ("404").
const (
	// ClassTimeout: the request did not complete within its timeout, or a
	// transport timeout (dial, TLS handshake) fired.
	ClassTimeout = "timeout"
	// ClassNetwork: no response for another reason: connection refused or
	// reset, DNS failure, TLS failure, malformed response.
	ClassNetwork = "network"
	// ClassRedirects: the redirect limit was hit. Always permanent, since the
	// same URL will redirect the same way; not accepted in retry_on.
	ClassRedirects = "redirects"
)

// Sizes of the parts of a non-2xx response kept or read.
const (
	// errorBodySnippet is how much of a non-2xx body goes into the error:
	// enough to show an API's error message, not enough to flood logs.
	errorBodySnippet = 200
	// drainLimit is how much more of a non-2xx body is read and discarded so
	// that the connection can be reused; past it, closing is cheaper.
	drainLimit = 64 << 10
)

// errTooManyRedirects is returned by the redirect policy NewHTTPRequestHandler
// installs, so that hitting the limit can be told apart from network errors.
var errTooManyRedirects = fmt.Errorf("stopped after %d redirects", MaxRedirects)

// HTTPRequestArgs are the arguments of the http.request task type, which
// sends one HTTP request and records the response.
//
// A 2xx response completes the task with an HTTPRequestOutput. Any other
// outcome fails the attempt with an *HTTPRequestError whose class decides
// whether the task is retried. The classes are:
//
//   - "3xx", "4xx", "5xx": every status code of the family;
//   - a status code from "300" to "599", such as "404" or "503";
//   - "timeout" (ClassTimeout) and "network" (ClassNetwork): no response.
//
// By default 5xx, 408, 429, timeout and network are retried and everything
// else fails the task permanently. RetryOn adds classes to the retried set
// and NoRetryOn removes them. A failed request is matched from the most to
// the least specific rule, and the first rule that names it decides:
//
//  1. its status code in NoRetryOn: permanent;
//  2. its status code in RetryOn: retried;
//  3. its family (or timeout/network) in NoRetryOn: permanent;
//  4. its family (or timeout/network) in RetryOn: retried;
//  5. the defaults above.
//
// So NoRetryOn beats RetryOn for the same class, and both beat the defaults
// (no_retry_on ["4xx"] stops 429 being retried too), while a code beats its
// family: no_retry_on ["503"] makes 503 permanent though 5xx is retried, and
// retry_on ["503"] with no_retry_on ["5xx"] retries 503 and no other 5xx.
//
// A retried 429 or 503 carrying a Retry-After header (delta-seconds or an
// HTTP date) is retried after that delay, capped at MaxRetryAfter, instead of
// the retry policy's backoff; a zero or past Retry-After keeps the backoff so
// a server with a skewed clock cannot cause a burst of immediate retries.
//
// Tasks run at least once: a retried or re-run POST is sent again, so make
// the receiving end idempotent (for example with an Idempotency-Key header
// derived from the task ID).
type HTTPRequestArgs struct {
	// Method is the HTTP method, default GET. It is matched case-insensitively
	// against GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS and TRACE (CONNECT
	// opens a tunnel, which a task cannot use) and sent upper-case.
	Method string `json:"method,omitempty"`
	// URL is the absolute http or https URL to request. Userinfo is sent as
	// basic authentication; errors show the URL without userinfo or query.
	URL string `json:"url"`
	// Headers are the request headers. "Host" overrides the Host sent;
	// Content-Length is computed from Body.
	Headers map[string]string `json:"headers,omitempty"`
	// Body is sent as-is; set Content-Type in Headers to describe it.
	Body string `json:"body,omitempty"`
	// Timeout bounds the whole request, response body included: a Go
	// duration string, default 30s (DefaultHTTPTimeout), at most 10m
	// (MaxHTTPTimeout).
	Timeout string `json:"timeout,omitempty"`
	// RetryOn lists classes to retry on top of the defaults.
	RetryOn []string `json:"retry_on,omitempty"`
	// NoRetryOn lists classes never to retry; see the type's doc for how it
	// combines with RetryOn.
	NoRetryOn []string `json:"no_retry_on,omitempty"`
}

// TaskType implements jobs.Args.
func (HTTPRequestArgs) TaskType() string { return "http.request" }

// Validate implements jobs.Validator. Errors are *jobs.ValidationError naming
// the field, e.g. "args.url" or "args.retry_on[1]".
func (a HTTPRequestArgs) Validate() error {
	_, err := a.plan()
	return err
}

// httpPlan is HTTPRequestArgs checked and normalised for sending.
type httpPlan struct {
	method    string
	url       string
	redacted  string // url for error messages
	timeout   time.Duration
	retryOn   map[string]bool
	noRetryOn map[string]bool
}

// plan checks the arguments; errors are *jobs.ValidationError.
func (a HTTPRequestArgs) plan() (*httpPlan, error) {
	p := &httpPlan{method: strings.ToUpper(a.Method), url: a.URL}
	if p.method == "" {
		p.method = http.MethodGet
	}
	if !isAllowedMethod(p.method) {
		return nil, &jobs.ValidationError{Field: "args.method", Message: fmt.Sprintf("%q is not one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, TRACE", a.Method)}
	}

	if a.URL == "" {
		return nil, &jobs.ValidationError{Field: "args.url", Message: "is required"}
	}
	// The URL is not echoed back: it may carry credentials.
	u, err := url.Parse(a.URL)
	if err != nil {
		return nil, &jobs.ValidationError{Field: "args.url", Message: "is not a valid URL"}
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &jobs.ValidationError{Field: "args.url", Message: "must be an absolute http or https URL"}
	}
	p.redacted = redactURL(u)

	names := make([]string, 0, len(a.Headers))
	for name := range a.Headers {
		names = append(names, name)
	}
	sort.Strings(names) // report the same bad header every time
	for _, name := range names {
		field := fmt.Sprintf("args.headers[%q]", name)
		if !isToken(name) {
			return nil, &jobs.ValidationError{Field: field, Message: "is not a valid header name"}
		}
		if !isHeaderValue(a.Headers[name]) {
			return nil, &jobs.ValidationError{Field: field, Message: "value must not contain control characters"}
		}
	}

	p.timeout = DefaultHTTPTimeout
	if a.Timeout != "" {
		d, err := time.ParseDuration(a.Timeout)
		switch {
		case err != nil:
			return nil, &jobs.ValidationError{Field: "args.timeout", Message: fmt.Sprintf(`%q is not a Go duration such as "30s"`, a.Timeout)}
		case d <= 0:
			return nil, &jobs.ValidationError{Field: "args.timeout", Message: "must be positive"}
		case d > MaxHTTPTimeout:
			return nil, &jobs.ValidationError{Field: "args.timeout", Message: fmt.Sprintf("must be at most %s", MaxHTTPTimeout)}
		}
		p.timeout = d
	}

	if p.retryOn, err = classSet("args.retry_on", a.RetryOn); err != nil {
		return nil, err
	}
	if p.noRetryOn, err = classSet("args.no_retry_on", a.NoRetryOn); err != nil {
		return nil, err
	}
	return p, nil
}

// isAllowedMethod reports whether m is a method a task may send.
func isAllowedMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// isToken reports whether s is an RFC 9110 token, the syntax of header names.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// isHeaderValue reports whether v can be sent as a header value: no control
// characters but tab. net/http would refuse the request otherwise, and that
// must be a validation error, not a retried "network" failure.
func isHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// classSet parses a retry_on or no_retry_on list, case-insensitively.
func classSet(field string, classes []string) (map[string]bool, error) {
	set := make(map[string]bool, len(classes))
	for i, c := range classes {
		c = strings.ToLower(strings.TrimSpace(c))
		if !isClass(c) {
			return nil, &jobs.ValidationError{
				Field:   fmt.Sprintf("%s[%d]", field, i),
				Message: fmt.Sprintf(`%q is not a class: use "3xx", "4xx", "5xx", a status code from 300 to 599, "timeout" or "network"`, classes[i]),
			}
		}
		set[c] = true
	}
	return set, nil
}

// isClass reports whether c (lower-case) names a failure class.
func isClass(c string) bool {
	switch c {
	case ClassTimeout, ClassNetwork, "3xx", "4xx", "5xx":
		return true
	}
	if len(c) != 3 {
		return false
	}
	code, err := strconv.Atoi(c)
	return err == nil && code >= 300 && code <= 599
}

// statusFamily is the class of code's family, e.g. "4xx" for 404.
func statusFamily(code int) string { return strconv.Itoa(code/100) + "xx" }

// retriedByDefault reports whether class is in the default retried set.
func retriedByDefault(class string) bool {
	switch class {
	case "5xx", "408", "429", ClassTimeout, ClassNetwork:
		return true
	}
	return false
}

// retryStatus applies the matching rules of HTTPRequestArgs to a status code.
func (p *httpPlan) retryStatus(code int) bool {
	c, fam := strconv.Itoa(code), statusFamily(code)
	switch {
	case p.noRetryOn[c]:
		return false
	case p.retryOn[c]:
		return true
	case p.noRetryOn[fam]:
		return false
	case p.retryOn[fam]:
		return true
	}
	return retriedByDefault(c) || retriedByDefault(fam)
}

// retryClass applies the matching rules to a class without a status code.
func (p *httpPlan) retryClass(class string) bool {
	switch {
	case p.noRetryOn[class]:
		return false
	case p.retryOn[class]:
		return true
	}
	return retriedByDefault(class)
}

// redactURL renders u for error messages without its userinfo, query and
// fragment, which commonly carry credentials and tokens.
func redactURL(u *url.URL) string {
	r := *u
	r.User = nil
	hadQuery := r.RawQuery != "" || r.ForceQuery
	r.RawQuery, r.ForceQuery = "", false
	r.Fragment, r.RawFragment = "", ""
	s := r.String()
	if hadQuery {
		s += "?[redacted]"
	}
	return s
}

// HTTPRequestOutput is the output of a completed http.request task.
type HTTPRequestOutput struct {
	Status int `json:"status"`
	// Headers are the response headers, canonically named, with the values
	// of a repeated header joined by ", ".
	Headers map[string]string `json:"headers"`
	// Body is the response body as text, cut to BuiltinConfig.MaxResponseBody
	// bytes. Stored as JSON, bytes that are not UTF-8 become U+FFFD, so this
	// is not meant for binary responses.
	Body string `json:"body"`
	// Truncated reports that Body was cut.
	Truncated bool `json:"truncated"`
}

// HTTPRequestError is the error of a failed http.request attempt. The
// handler returns it wrapped in jobs.Permanent when its class is not retried
// and in jobs.RetryAfter when the server set Retry-After; use errors.As to
// reach it.
type HTTPRequestError struct {
	Method string
	// URL is the request URL without userinfo, query or fragment.
	URL string
	// Class is the status family ("4xx") when a response arrived, otherwise
	// ClassTimeout, ClassNetwork or ClassRedirects.
	Class string
	// StatusCode and Status are those of the response, zero without one.
	StatusCode int
	Status     string
	// Body is the start of the response body, to show the server's reason.
	Body string
	// Err is the transport error when no response arrived.
	Err error
}

// Error names the request and what went wrong; for a response it quotes the
// start of the body, since that is usually where an API explains itself.
func (e *HTTPRequestError) Error() string {
	if e.StatusCode == 0 {
		return fmt.Sprintf("%s %s: %s: %v", e.Method, e.URL, e.Class, e.Err)
	}
	msg := fmt.Sprintf("%s %s: %s", e.Method, e.URL, e.Status)
	if e.Body != "" {
		msg += ": " + strconv.Quote(strings.ToValidUTF8(e.Body, "\uFFFD"))
	}
	return msg
}

// Unwrap returns the transport error, if any.
func (e *HTTPRequestError) Unwrap() error { return e.Err }

// httpRequestHandler sends the requests of http.request tasks.
type httpRequestHandler struct {
	client  *http.Client
	maxBody int64
}

// NewHTTPRequestHandler returns the handler of http.request, sending with
// cfg.HTTPClient (see BuiltinConfig.WithDefaults for unset fields). When the
// client has no CheckRedirect, the handler uses a copy of it that stops after
// MaxRedirects so that a redirect loop fails permanently instead of being
// retried as a network error; the copy shares the client's transport.
func NewHTTPRequestHandler(cfg BuiltinConfig) Handler {
	cfg = cfg.WithDefaults()
	client := cfg.HTTPClient
	if client.CheckRedirect == nil {
		c := *client
		c.CheckRedirect = limitRedirects
		client = &c
	}
	h := &httpRequestHandler{client: client, maxBody: cfg.MaxResponseBody}
	return Typed(h.process)
}

// limitRedirects is net/http's default redirect policy with a sentinel error.
func limitRedirects(_ *http.Request, via []*http.Request) error {
	if len(via) >= MaxRedirects {
		return errTooManyRedirects
	}
	return nil
}

// process runs one attempt of an http.request task.
func (h *httpRequestHandler) process(ctx context.Context, _ *jobs.Task, args HTTPRequestArgs) (any, error) {
	p, err := args.plan()
	if err != nil {
		// Args that bypassed validation at enqueue will never become valid.
		return nil, jobs.Permanent(fmt.Errorf("http.request: %w", err))
	}

	reqCtx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var body io.Reader
	if args.Body != "" {
		body = strings.NewReader(args.Body) // lets net/http set Content-Length and replay it on 307/308
	}
	req, err := http.NewRequestWithContext(reqCtx, p.method, p.url, body)
	if err != nil {
		return nil, jobs.Permanent(fmt.Errorf("http.request: build %s %s: %w", p.method, p.redacted, err))
	}
	for name, value := range args.Headers {
		if strings.EqualFold(name, "Host") {
			req.Host = value // net/http ignores a Host entry in Header
			continue
		}
		req.Header.Set(name, value)
	}

	resp, err := h.client.Do(req)
	if err != nil {
		return nil, p.transportError(ctx, reqCtx, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, p.statusError(resp, time.Now())
	}
	b, truncated, err := readLimited(resp.Body, h.maxBody)
	if err != nil {
		return nil, p.transportError(ctx, reqCtx, fmt.Errorf("read response body: %w", err))
	}
	headers := make(map[string]string, len(resp.Header))
	for name, values := range resp.Header {
		headers[name] = strings.Join(values, ", ")
	}
	return HTTPRequestOutput{Status: resp.StatusCode, Headers: headers, Body: string(b), Truncated: truncated}, nil
}

// transportError turns a failure to get (or read) a response into the
// handler's error. When the task's own ctx is done (cancelled, attempt
// timeout, shutdown), its error is returned as is so the task is reported
// that way rather than as a retryable request timeout.
func (p *httpPlan) transportError(ctx, reqCtx context.Context, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // url.Error repeats the URL, query included
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("http.request %s %s: %w", p.method, p.redacted, ctxErr)
	}
	e := &HTTPRequestError{Method: p.method, URL: p.redacted, Err: err}
	var netErr net.Error
	switch {
	case errors.Is(err, errTooManyRedirects):
		e.Class = ClassRedirects
		return jobs.Permanent(e)
	case reqCtx.Err() != nil:
		e.Class = ClassTimeout
		e.Err = fmt.Errorf("not done within %s: %w", p.timeout, err)
	case errors.As(err, &netErr) && netErr.Timeout():
		e.Class = ClassTimeout
	default:
		e.Class = ClassNetwork
	}
	if !p.retryClass(e.Class) {
		return jobs.Permanent(e)
	}
	return e
}

// statusError turns a non-2xx response into the handler's error.
func (p *httpPlan) statusError(resp *http.Response, now time.Time) error {
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodySnippet)) // best effort: the status says enough
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	e := &HTTPRequestError{
		Method:     p.method,
		URL:        p.redacted,
		Class:      statusFamily(resp.StatusCode),
		StatusCode: resp.StatusCode,
		Status:     resp.Status,
		Body:       string(snippet),
	}
	if !p.retryStatus(resp.StatusCode) {
		return jobs.Permanent(e)
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), now); ok {
			return jobs.RetryAfter(d, e)
		}
	}
	return e
}

// parseRetryAfter reads a Retry-After value, delta-seconds or an HTTP date,
// as a delay from now capped at MaxRetryAfter. It reports false for a
// missing, malformed, zero or past value.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if isDigits(v) {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > int64(MaxRetryAfter/time.Second) {
			d = MaxRetryAfter // only overflow fails ParseInt on digits
		} else {
			d = time.Duration(secs) * time.Second
		}
	} else {
		t, err := http.ParseTime(v)
		if err != nil {
			return 0, false
		}
		d = t.Sub(now)
	}
	if d <= 0 {
		return 0, false
	}
	return min(d, MaxRetryAfter), true
}

// isDigits reports whether s is non-empty and all ASCII digits.
func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// readLimited reads r up to limit bytes and reports whether there was more.
func readLimited(r io.Reader, limit int64) ([]byte, bool, error) {
	n := limit
	if n < math.MaxInt64 {
		n++ // one more byte tells a body of exactly limit bytes from a longer one
	}
	b, err := io.ReadAll(io.LimitReader(r, n))
	if err != nil {
		return nil, false, err
	}
	if int64(len(b)) > limit {
		return b[:limit], true, nil
	}
	return b, false, nil
}
