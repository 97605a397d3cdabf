package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard/switchyard/jobs"
)

// statusServer answers /status/{code} with that code, the Retry-After given
// in the query parameter ra, and the body given in the query parameter body.
func statusServer(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, err := strconv.Atoi(r.PathValue("code"))
		if err != nil {
			http.Error(w, "bad code", http.StatusBadRequest)
			return
		}
		if ra := r.URL.Query().Get("ra"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, r.URL.Query().Get("body"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// runHTTP runs one http.request attempt with the default configuration.
func runHTTP(t *testing.T, ctx context.Context, args HTTPRequestArgs) (any, error) {
	t.Helper()
	return NewHTTPRequestHandler(BuiltinConfig{}).ProcessTask(ctx, newTask(t, args))
}

// requireRetryable asserts that err is a retryable HTTPRequestError.
func requireRetryable(t *testing.T, err error) *HTTPRequestError {
	t.Helper()
	var perm *jobs.PermanentError
	if errors.As(err, &perm) {
		t.Fatalf("err = %v; want retryable, got permanent", err)
	}
	var he *HTTPRequestError
	if !errors.As(err, &he) {
		t.Fatalf("err = %v (%T); want an *HTTPRequestError", err, err)
	}
	return he
}

// requirePermanent asserts that err is a permanent HTTPRequestError.
func requirePermanent(t *testing.T, err error) *HTTPRequestError {
	t.Helper()
	var perm *jobs.PermanentError
	if !errors.As(err, &perm) {
		t.Fatalf("err = %v; want a *jobs.PermanentError", err)
	}
	var he *HTTPRequestError
	if !errors.As(err, &he) {
		t.Fatalf("err = %v (%T); want an *HTTPRequestError inside", err, err)
	}
	return he
}

func TestHTTPRequestSuccess(t *testing.T) {
	t.Parallel()
	type received struct {
		method, token, contentType, body string
		contentLength                    int64
	}
	got := make(chan received, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- received{r.Method, r.Header.Get("X-Token"), r.Header.Get("Content-Type"), string(b), r.ContentLength}
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":7}`)
	}))
	t.Cleanup(srv.Close)

	out, err := runHTTP(t, context.Background(), HTTPRequestArgs{
		Method:  "post", // case-insensitive
		URL:     srv.URL + "/widgets",
		Headers: map[string]string{"X-Token": "t0k", "Content-Type": "application/json"},
		Body:    `{"name":"w"}`,
	})
	if err != nil {
		t.Fatalf("ProcessTask: %v", err)
	}

	req := <-got
	want := received{"POST", "t0k", "application/json", `{"name":"w"}`, int64(len(`{"name":"w"}`))}
	if req != want {
		t.Errorf("server received %+v; want %+v", req, want)
	}

	res, ok := out.(HTTPRequestOutput)
	if !ok {
		t.Fatalf("output is %T; want HTTPRequestOutput", out)
	}
	if res.Status != 201 || res.Body != `{"id":7}` || res.Truncated {
		t.Errorf("output = %+v; want status 201, the body, not truncated", res)
	}
	if res.Headers["X-Multi"] != "a, b" {
		t.Errorf("X-Multi = %q; want %q", res.Headers["X-Multi"], "a, b")
	}

	// The stored output has the documented JSON shape.
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatalf("marshal output: %v", err)
	}
	var shape map[string]any
	if err := json.Unmarshal(b, &shape); err != nil {
		t.Fatalf("unmarshal output: %v", err)
	}
	if shape["status"] != float64(201) || shape["body"] != `{"id":7}` || shape["truncated"] != false {
		t.Errorf("output JSON = %s", b)
	}
	if h, _ := shape["headers"].(map[string]any); h["X-Multi"] != "a, b" {
		t.Errorf("output JSON headers = %v", shape["headers"])
	}
}

func TestHTTPRequestTruncatesBody(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.URL.Query().Get("body"))
	}))
	t.Cleanup(srv.Close)
	h := NewHTTPRequestHandler(BuiltinConfig{HTTPClient: srv.Client(), MaxResponseBody: 5})

	tests := []struct {
		body, want string
		truncated  bool
	}{
		{"hello world", "hello", true},
		{"hello", "hello", false}, // exactly the limit is not truncated
		{"hi", "hi", false},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			t.Parallel()
			out, err := h.ProcessTask(context.Background(), newTask(t, HTTPRequestArgs{URL: srv.URL + "/?body=" + strings.ReplaceAll(tt.body, " ", "+")}))
			if err != nil {
				t.Fatalf("ProcessTask: %v", err)
			}
			res := out.(HTTPRequestOutput)
			if res.Body != tt.want || res.Truncated != tt.truncated {
				t.Errorf("body, truncated = %q, %v; want %q, %v", res.Body, res.Truncated, tt.want, tt.truncated)
			}
		})
	}
}

func TestHTTPRequestStatusClassification(t *testing.T) {
	t.Parallel()
	srv := statusServer(t)
	tests := []struct {
		name        string
		code        int
		retryOn     []string
		noRetryOn   []string
		wantRetried bool
	}{
		{"500 retried by default", 500, nil, nil, true},
		{"502 retried by default", 502, nil, nil, true},
		{"408 retried by default", 408, nil, nil, true},
		{"429 retried by default", 429, nil, nil, true},
		{"404 permanent by default", 404, nil, nil, false},
		{"400 permanent by default", 400, nil, nil, false},
		{"304 permanent by default", 304, nil, nil, false},
		{"retry_on code", 404, []string{"404"}, nil, true},
		{"retry_on family", 409, []string{"4xx"}, nil, true},
		{"no_retry_on family", 500, nil, []string{"5xx"}, false},
		{"no_retry_on code beats default family", 503, nil, []string{"503"}, false},
		{"no_retry_on code leaves rest of family", 500, nil, []string{"503"}, true},
		{"no_retry_on family beats default code", 429, nil, []string{"4xx"}, false},
		{"retry_on code beats no_retry_on family", 503, []string{"503"}, []string{"5xx"}, true},
		{"no_retry_on family still applies to others", 502, []string{"503"}, []string{"5xx"}, false},
		{"no_retry_on code beats retry_on family", 409, []string{"4xx"}, []string{"409"}, false},
		{"retry_on family with a code excluded", 418, []string{"4xx"}, []string{"409"}, true},
		{"no_retry_on beats retry_on for the same class", 404, []string{"404"}, []string{"404"}, false},
		{"classes are case-insensitive", 500, nil, []string{"5XX"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := runHTTP(t, context.Background(), HTTPRequestArgs{
				URL:       fmt.Sprintf("%s/status/%d", srv.URL, tt.code),
				RetryOn:   tt.retryOn,
				NoRetryOn: tt.noRetryOn,
			})
			var he *HTTPRequestError
			if tt.wantRetried {
				he = requireRetryable(t, err)
			} else {
				he = requirePermanent(t, err)
			}
			if he.StatusCode != tt.code || he.Class != statusFamily(tt.code) {
				t.Errorf("error status, class = %d, %q; want %d, %q", he.StatusCode, he.Class, tt.code, statusFamily(tt.code))
			}
		})
	}
}

func TestHTTPRequestRetryAfter(t *testing.T) {
	t.Parallel()
	srv := statusServer(t)
	get := func(t *testing.T, code int, retryAfter string, noRetryOn ...string) error {
		t.Helper()
		_, err := runHTTP(t, context.Background(), HTTPRequestArgs{
			URL:       fmt.Sprintf("%s/status/%d?ra=%s", srv.URL, code, strings.ReplaceAll(retryAfter, " ", "+")),
			NoRetryOn: noRetryOn,
		})
		return err
	}
	requireAfter := func(t *testing.T, err error) time.Duration {
		t.Helper()
		requireRetryable(t, err)
		var ra *jobs.RetryAfterError
		if !errors.As(err, &ra) {
			t.Fatalf("err = %v; want a *jobs.RetryAfterError", err)
		}
		return ra.After
	}

	t.Run("429 delta-seconds", func(t *testing.T) {
		t.Parallel()
		err := get(t, 429, "7")
		if after := requireAfter(t, err); after != 7*time.Second {
			t.Errorf("After = %s; want 7s", after)
		}
		if he := requireRetryable(t, err); he.StatusCode != 429 {
			t.Errorf("status = %d; want 429", he.StatusCode)
		}
	})
	t.Run("503 HTTP-date", func(t *testing.T) {
		t.Parallel()
		at := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
		after := requireAfter(t, get(t, 503, at))
		// The date has one-second resolution and time passes before the
		// handler reads it.
		if after <= 80*time.Second || after > 90*time.Second {
			t.Errorf("After = %s; want about 90s", after)
		}
	})
	t.Run("capped", func(t *testing.T) {
		t.Parallel()
		if after := requireAfter(t, get(t, 429, "999999999999999999999")); after != MaxRetryAfter {
			t.Errorf("After = %s; want %s", after, MaxRetryAfter)
		}
	})
	for _, ra := range []string{"0", "soon", "-3", time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)} {
		t.Run("falls back to backoff for "+ra, func(t *testing.T) {
			t.Parallel()
			err := get(t, 429, ra)
			requireRetryable(t, err)
			var rae *jobs.RetryAfterError
			if errors.As(err, &rae) {
				t.Errorf("err = %v; want the policy's backoff, not a RetryAfterError", err)
			}
		})
	}
	t.Run("ignored on other statuses", func(t *testing.T) {
		t.Parallel()
		err := get(t, 500, "7")
		requireRetryable(t, err)
		var rae *jobs.RetryAfterError
		if errors.As(err, &rae) {
			t.Errorf("err = %v; Retry-After applies to 429 and 503 only", err)
		}
	})
	t.Run("not retried when no_retry_on", func(t *testing.T) {
		t.Parallel()
		requirePermanent(t, get(t, 429, "7", "429"))
	})
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		value  string
		want   time.Duration
		wantOK bool
	}{
		{"7", 7 * time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"3600", time.Hour, true},
		{"3601", MaxRetryAfter, true},
		{"Sat, 01 Mar 2025 12:00:30 GMT", 30 * time.Second, true},
		{"Saturday, 01-Mar-25 12:00:30 GMT", 30 * time.Second, true}, // RFC 850
		{"Sat Mar  1 12:00:30 2025", 30 * time.Second, true},         // asctime
		{"Sun, 02 Mar 2025 12:00:00 GMT", MaxRetryAfter, true},
		{"Sat, 01 Mar 2025 11:59:00 GMT", 0, false},
		{"0", 0, false},
		{"", 0, false},
		{"+7", 0, false},
		{"1.5", 0, false},
		{"tomorrow", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseRetryAfter(tt.value, now)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("parseRetryAfter(%q) = %s, %v; want %s, %v", tt.value, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestHTTPRequestErrorMessage(t *testing.T) {
	t.Parallel()
	srv := statusServer(t)
	u := strings.Replace(srv.URL, "http://", "http://alice:hunter2@", 1) +
		"/status/404?token=s3cret&body=" + "no+such+widget" + strings.Repeat("x", 500)
	_, err := runHTTP(t, context.Background(), HTTPRequestArgs{Method: "DELETE", URL: u})
	he := requirePermanent(t, err)

	msg := err.Error()
	for _, want := range []string{"DELETE", srv.URL + "/status/404?[redacted]", "404 Not Found", "no such widget"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	for _, secret := range []string{"hunter2", "alice", "s3cret"} {
		if strings.Contains(msg, secret) {
			t.Errorf("error %q leaks %q", msg, secret)
		}
	}
	if len(he.Body) != errorBodySnippet {
		t.Errorf("error body is %d bytes; want the first %d", len(he.Body), errorBodySnippet)
	}
}

func TestHTTPRequestNetworkError(t *testing.T) {
	t.Parallel()
	// A closed listener's address refuses connections.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatalf("close listener: %v", err)
	}
	url := "http://" + addr + "/x?key=s3cret"

	t.Run("retried by default", func(t *testing.T) {
		t.Parallel()
		_, err := runHTTP(t, context.Background(), HTTPRequestArgs{URL: url})
		he := requireRetryable(t, err)
		if he.Class != ClassNetwork || he.StatusCode != 0 {
			t.Errorf("class, status = %q, %d; want %q, 0", he.Class, he.StatusCode, ClassNetwork)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error %q leaks the query", err)
		}
	})
	t.Run("permanent when no_retry_on", func(t *testing.T) {
		t.Parallel()
		_, err := runHTTP(t, context.Background(), HTTPRequestArgs{URL: url, NoRetryOn: []string{"network"}})
		if he := requirePermanent(t, err); he.Class != ClassNetwork {
			t.Errorf("class = %q; want %q", he.Class, ClassNetwork)
		}
	})
}

// blockingServer's handler blocks until the client gives up on the request;
// it sends on arrived when a request comes in.
func blockingServer(t *testing.T) (srv *httptest.Server, arrived <-chan struct{}) {
	t.Helper()
	ch := make(chan struct{}, 1)
	release := make(chan struct{})
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case ch <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	return srv, ch
}

func TestHTTPRequestTimeout(t *testing.T) {
	t.Parallel()
	srv, _ := blockingServer(t)

	_, err := runHTTP(t, context.Background(), HTTPRequestArgs{URL: srv.URL, Timeout: "50ms"})
	he := requireRetryable(t, err)
	if he.Class != ClassTimeout {
		t.Errorf("class = %q; want %q (err %v)", he.Class, ClassTimeout, err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v; want it to wrap context.DeadlineExceeded", err)
	}
	if errors.Is(err, context.Canceled) {
		t.Errorf("err = %v; a request timeout is not a cancellation", err)
	}

	_, err = runHTTP(t, context.Background(), HTTPRequestArgs{URL: srv.URL, Timeout: "50ms", NoRetryOn: []string{"timeout"}})
	if he := requirePermanent(t, err); he.Class != ClassTimeout {
		t.Errorf("class = %q; want %q", he.Class, ClassTimeout)
	}
}

func TestHTTPRequestTaskCancelledPropagates(t *testing.T) {
	t.Parallel()
	srv, arrived := blockingServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	done := make(chan error, 1)
	task := newTask(t, HTTPRequestArgs{URL: srv.URL})
	go func() {
		_, err := NewHTTPRequestHandler(BuiltinConfig{}).ProcessTask(ctx, task)
		done <- err
	}()
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("request never reached the server")
	}
	cancel()

	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v; want one wrapping context.Canceled", err)
		}
		var he *HTTPRequestError
		if errors.As(err, &he) {
			t.Errorf("err = %v; a cancelled task must not be classed as a request failure", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("handler did not return after cancellation")
	}
}

func TestHTTPRequestRedirectLoopIsPermanent(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, "/loop", http.StatusFound)
	}))
	t.Cleanup(srv.Close)

	_, err := runHTTP(t, context.Background(), HTTPRequestArgs{URL: srv.URL + "/loop"})
	if he := requirePermanent(t, err); he.Class != ClassRedirects {
		t.Errorf("class = %q; want %q (err %v)", he.Class, ClassRedirects, err)
	}
	if n := hits.Load(); n != MaxRedirects {
		t.Errorf("server got %d requests; want %d", n, MaxRedirects)
	}
}

func TestHTTPRequestRespectsClientRedirectPolicy(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	h := NewHTTPRequestHandler(BuiltinConfig{HTTPClient: client})
	_, err := h.ProcessTask(context.Background(), newTask(t, HTTPRequestArgs{URL: srv.URL}))
	if he := requirePermanent(t, err); he.StatusCode != http.StatusFound {
		t.Errorf("status = %d; want the unfollowed 302", he.StatusCode)
	}
}

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestHTTPRequestUsesConfiguredClient(t *testing.T) {
	t.Parallel()
	got := make(chan *http.Request, 1)
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got <- r
		return &http.Response{
			StatusCode: http.StatusNoContent,
			Status:     "204 No Content",
			Header:     http.Header{},
			Body:       http.NoBody,
			Request:    r,
		}, nil
	})}

	h := NewHTTPRequestHandler(BuiltinConfig{HTTPClient: client})
	out, err := h.ProcessTask(context.Background(), newTask(t, HTTPRequestArgs{
		Method:  "HEAD",
		URL:     "https://api.example.test/ping",
		Headers: map[string]string{"Host": "virtual.example.test", "Accept": "text/plain"},
	}))
	if err != nil {
		t.Fatalf("ProcessTask: %v", err)
	}
	if res := out.(HTTPRequestOutput); res.Status != http.StatusNoContent || res.Body != "" {
		t.Errorf("output = %+v; want status 204 and no body", res)
	}
	r := <-got
	if r.Method != http.MethodHead || r.Host != "virtual.example.test" || r.Header.Get("Accept") != "text/plain" {
		t.Errorf("sent %s Host=%q Accept=%q; want HEAD, the Host override and the Accept header", r.Method, r.Host, r.Header.Get("Accept"))
	}
	if _, ok := r.Header["Host"]; ok {
		t.Errorf("Host was left in the header map")
	}
	if client.CheckRedirect != nil {
		t.Error("NewHTTPRequestHandler modified the caller's client")
	}
}

func TestHTTPRequestArgsValidate(t *testing.T) {
	t.Parallel()
	const u = "https://example.test/hook"
	tests := []struct {
		name      string
		args      HTTPRequestArgs
		wantField string // "" for valid
	}{
		{"minimal", HTTPRequestArgs{URL: u}, ""},
		{"full", HTTPRequestArgs{
			Method: "patch", URL: "http://user:pw@example.test:8080/a?b=c", Headers: map[string]string{"X-A": "1\t2"},
			Body: "x", Timeout: "10m", RetryOn: []string{"404", "4XX", "3xx"}, NoRetryOn: []string{"timeout", "network", "599", "300"},
		}, ""},
		{"missing url", HTTPRequestArgs{}, "args.url"},
		{"relative url", HTTPRequestArgs{URL: "/hook"}, "args.url"},
		{"no host", HTTPRequestArgs{URL: "http:///hook"}, "args.url"},
		{"ftp url", HTTPRequestArgs{URL: "ftp://example.test/f"}, "args.url"},
		{"unparsable url", HTTPRequestArgs{URL: "http://[::1"}, "args.url"},
		{"unknown method", HTTPRequestArgs{Method: "FETCH", URL: u}, "args.method"},
		{"connect", HTTPRequestArgs{Method: "CONNECT", URL: u}, "args.method"},
		{"bad header name", HTTPRequestArgs{URL: u, Headers: map[string]string{"Bad Name": "x"}}, `args.headers["Bad Name"]`},
		{"header injection", HTTPRequestArgs{URL: u, Headers: map[string]string{"X-A": "a\r\nX-B: b"}}, `args.headers["X-A"]`},
		{"bad timeout", HTTPRequestArgs{URL: u, Timeout: "30"}, "args.timeout"},
		{"zero timeout", HTTPRequestArgs{URL: u, Timeout: "0s"}, "args.timeout"},
		{"negative timeout", HTTPRequestArgs{URL: u, Timeout: "-1s"}, "args.timeout"},
		{"timeout too long", HTTPRequestArgs{URL: u, Timeout: "10m1s"}, "args.timeout"},
		{"unknown retry class", HTTPRequestArgs{URL: u, RetryOn: []string{"5xx", "flaky"}}, "args.retry_on[1]"},
		{"2xx is not a failure", HTTPRequestArgs{URL: u, RetryOn: []string{"200"}}, "args.retry_on[0]"},
		{"redirects not retryable", HTTPRequestArgs{URL: u, RetryOn: []string{"redirects"}}, "args.retry_on[0]"},
		{"unknown no-retry class", HTTPRequestArgs{URL: u, NoRetryOn: []string{"5xx", "404", "600"}}, "args.no_retry_on[2]"},
		{"family out of range", HTTPRequestArgs{URL: u, NoRetryOn: []string{"2xx"}}, "args.no_retry_on[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.args.Validate()
			if tt.wantField == "" {
				if err != nil {
					t.Fatalf("Validate() = %v; want nil", err)
				}
				return
			}
			var ve *jobs.ValidationError
			if !errors.As(err, &ve) || ve.Field != tt.wantField {
				t.Fatalf("Validate() = %v; want a ValidationError on %s", err, tt.wantField)
			}
			if strings.Contains(ve.Message, "pw@") {
				t.Errorf("message %q echoes credentials", ve.Message)
			}
		})
	}
}

func TestHTTPRequestHandlerRejectsInvalidArgsPermanently(t *testing.T) {
	t.Parallel()
	// Args that skipped validation at enqueue will never become valid.
	_, err := runHTTP(t, context.Background(), HTTPRequestArgs{URL: "file:///etc/passwd"})
	var perm *jobs.PermanentError
	var ve *jobs.ValidationError
	if !errors.As(err, &perm) || !errors.As(err, &ve) || ve.Field != "args.url" {
		t.Fatalf("err = %v; want a permanent ValidationError on args.url", err)
	}
}
