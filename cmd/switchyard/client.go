package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The client commands (task, queue, workers) talk to a running `switchyard
// serve` over its HTTP API instead of opening the database.

// defaultServer is the API address when neither --server nor SWITCHYARD_URL
// is set: `switchyard serve`'s default --http-addr on this machine.
const defaultServer = "http://127.0.0.1:8080"

// serverEnv and timeoutEnv are the environment variables of --server and
// of the HTTP request timeout. --server's is not SWITCHYARD_SERVER, and
// task enqueue calls its request timeout --request-timeout (its --timeout
// is the task's), so both are applied by hand after applyEnv.
const (
	serverEnv  = "SWITCHYARD_URL"
	timeoutEnv = "SWITCHYARD_TIMEOUT"
)

// maxResponseBytes bounds what the client reads of a response; a page of
// 1000 tasks with outputs stays far below it.
const maxResponseBytes = 256 << 20

// clientFlags are the flags every client command shares.
type clientFlags struct {
	server  string
	token   string
	asJSON  bool
	timeout time.Duration
	// timeoutFlag is the name of the request timeout flag: "timeout", or
	// "request-timeout" where --timeout means something else.
	timeoutFlag string
}

func (c *clientFlags) register(fs *flag.FlagSet, timeoutFlag string) {
	c.timeoutFlag = timeoutFlag
	fs.StringVar(&c.server, "server", defaultServer, "base URL of the Switchyard API (env "+serverEnv+")")
	fs.StringVar(&c.token, "token", "", "API bearer token (env SWITCHYARD_TOKEN)")
	fs.BoolVar(&c.asJSON, "json", false, "print the API's JSON response instead of a table")
	fs.DurationVar(&c.timeout, timeoutFlag, 30*time.Second, "timeout of each HTTP request (env "+timeoutEnv+")")
}

// applyEnv fills flags not given on the command line from the
// environment. perCall names the command's own flags that describe one
// invocation and are never read from it; --json is one of them too, so an
// exported variable cannot turn a person's tables into JSON.
func (c *clientFlags) applyEnv(fs *flag.FlagSet, getenv func(string) string, perCall ...string) error {
	skip := append([]string{"server", "json", c.timeoutFlag}, perCall...)
	if err := applyEnv(fs, getenv, skip...); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name, env := range map[string]string{"server": serverEnv, c.timeoutFlag: timeoutEnv} {
		if given[name] {
			continue
		}
		if v := getenv(env); v != "" {
			if err := fs.Set(name, v); err != nil {
				return fmt.Errorf("%s=%q: %w", env, v, err)
			}
		}
	}
	return nil
}

// newClient builds the command's HTTP client and API client. done releases
// the client's idle connections.
func (c *clientFlags) newClient() (api *apiClient, done func(), err error) {
	base, err := parseServer(c.server)
	if err != nil {
		return nil, nil, err
	}
	if c.timeout <= 0 {
		return nil, nil, fmt.Errorf("--%s must be positive, got %s", c.timeoutFlag, c.timeout)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	hc := &http.Client{Transport: transport, Timeout: c.timeout}
	api = &apiClient{
		base:        base,
		token:       strings.TrimSpace(c.token),
		http:        hc,
		timeoutFlag: c.timeoutFlag,
	}
	return api, transport.CloseIdleConnections, nil
}

// parseServer checks --server: an http or https URL, perhaps with a path
// prefix.
func parseServer(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("--server / %s %q: want a URL such as %s", serverEnv, redactURL(s), defaultServer)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// redactURL hides a password in a URL that may not parse.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	if at := strings.LastIndex(s, "@"); at >= 0 {
		return "…" + s[at:]
	}
	return s
}

// apiClient calls the Switchyard HTTP API.
type apiClient struct {
	base        *url.URL
	token       string
	http        *http.Client
	timeoutFlag string // for the hint of a timed-out request
}

// server is the base URL for messages.
func (c *apiClient) server() string { return c.base.Redacted() }

// do sends a request with body (JSON-encoded unless nil) and decodes the
// response into out (unless nil; a *json.RawMessage receives the body as
// is). A response other than 2xx is returned as an *apiError.
func (c *apiClient) do(ctx context.Context, method, path string, body, out any) error {
	_, err := c.send(ctx, method, path, nil, body, out)
	return err
}

// send is do with extra request headers, returning the response (its body
// already read and closed) for its status and headers.
func (c *apiClient) send(ctx context.Context, method, path string, header http.Header, body, out any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, rd)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("User-Agent", "switchyard-cli/"+buildVersion())
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes))
	if err != nil {
		return nil, c.transportError(ctx, method, path, err)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return res, c.responseError(res, data)
	}
	if out == nil {
		return res, nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		if !json.Valid(data) {
			return res, c.notJSON(method, path, res)
		}
		*raw = append((*raw)[:0], data...)
		return res, nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return res, c.notJSON(method, path, res)
	}
	return res, nil
}

func (c *apiClient) notJSON(method, path string, res *http.Response) error {
	return fmt.Errorf("%s %s: %s answered %s with a body that is not the expected JSON (content type %q); is --server / %s a Switchyard API?",
		method, path, c.server(), res.Status, res.Header.Get("Content-Type"), serverEnv)
}

// transportError explains a request that got no response. The URL in err
// is left out (it may carry a password): the redacted server is named
// instead.
func (c *apiClient) transportError(ctx context.Context, method, path string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s %s on %s: %w", method, path, c.server(), ctx.Err())
	case isTimeout(err):
		return fmt.Errorf("%s %s: no response from %s within %s\n(raise the limit with --%s or %s, or check --server / %s)",
			method, path, c.server(), c.http.Timeout, c.timeoutFlag, timeoutEnv, serverEnv)
	}
	return fmt.Errorf("cannot reach the Switchyard API at %s: %v\n(set the server with --server or %s)", c.server(), err, serverEnv)
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &te) && te.Timeout())
}

// problem is an RFC 9457 problem details body, as the API writes them
// (api/problem.go).
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Errors []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors"`
	KnownTypes []string `json:"known_types"`
}

// apiError is a response other than 2xx.
type apiError struct {
	Status  int
	Problem *problem // nil when the body was not problem+json
	server  string
	body    string // the start of a body that was not a problem
	hint    string
}

// Error is, for a problem, "422 validation-failed: <detail>" followed by a
// line per invalid field (unless the detail is that line), the known task
// types and a hint, as they apply.
func (e *apiError) Error() string {
	var b strings.Builder
	if p := e.Problem; p != nil {
		slug := p.Type[strings.LastIndex(p.Type, "/")+1:]
		if slug == "" {
			slug = strings.ToLower(strings.ReplaceAll(p.Title, " ", "-"))
		}
		detail := p.Detail
		if detail == "" {
			detail = p.Title
		}
		fmt.Fprintf(&b, "%d %s: %s", e.Status, slug, detail)
		for _, f := range p.Errors {
			if line := f.Field + ": " + f.Message; line != detail { // a validation error's detail is its one field
				fmt.Fprintf(&b, "\n  %s", line)
			}
		}
		if len(p.KnownTypes) > 0 {
			fmt.Fprintf(&b, "\n  known types: %s", strings.Join(p.KnownTypes, ", "))
		}
	} else {
		fmt.Fprintf(&b, "%d %s from %s", e.Status, http.StatusText(e.Status), e.server)
		if e.body != "" {
			fmt.Fprintf(&b, ": %s", e.body)
		}
	}
	if e.hint != "" {
		fmt.Fprintf(&b, "\n(%s)", e.hint)
	}
	return b.String()
}

func (c *apiClient) responseError(res *http.Response, data []byte) error {
	e := &apiError{Status: res.StatusCode, server: c.server()}
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	var p problem
	if (mt == "application/problem+json" || mt == "application/json") && json.Unmarshal(data, &p) == nil && p.Status != 0 {
		e.Problem = &p
	} else {
		body := strings.Join(strings.Fields(string(data)), " ")
		if len(body) > 200 {
			body = body[:200] + "…"
		}
		e.body = body
	}
	switch {
	case res.StatusCode == http.StatusUnauthorized && c.token == "":
		e.hint = "no token given: pass one with --token or set SWITCHYARD_TOKEN"
	case res.StatusCode == http.StatusUnauthorized:
		e.hint = "the server did not accept the token: check --token or SWITCHYARD_TOKEN"
	case res.StatusCode == http.StatusNotFound && (e.Problem == nil || strings.Contains(e.Problem.Detail, "no such endpoint")):
		e.hint = fmt.Sprintf("is %s (--server or %s) a Switchyard API of this version?", c.server(), serverEnv)
	}
	return e
}

// parseArgs parses args with fs, flags before, between or after the
// positional arguments, which it returns ("--" ends the flags). help
// reports -h.
func parseArgs(fs *flag.FlagSet, args []string) (positional []string, help bool, err error) {
	for remaining := args; ; {
		if help, err := parseFlags(fs, remaining); help || err != nil {
			return nil, help, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, false, nil
		}
		if consumed := len(remaining) - len(rest); consumed > 0 && remaining[consumed-1] == "--" {
			return append(positional, rest...), false, nil
		}
		positional = append(positional, rest[0])
		remaining = rest[1:]
	}
}

// printJSON writes raw indented.
func printJSON(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return fmt.Errorf("format JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// clientCommand is what every client command does first: parse its flags
// (registered by the caller on fs), check the positional arguments against
// their names, apply the environment and build the API client. A nil api
// with a nil error means -h was given and answered; done releases the
// client.
func clientCommand(fs *flag.FlagSet, cf *clientFlags, args []string, getenv func(string) string, names []string, perCall ...string) (api *apiClient, pos []string, done func(), err error) {
	pos, help, err := parseArgs(fs, args)
	if help || err != nil {
		return nil, nil, nil, err
	}
	cmd := strings.TrimPrefix(fs.Name(), "switchyard ")
	if len(pos) < len(names) {
		fs.Usage()
		return nil, nil, nil, fmt.Errorf("%s: missing %s", cmd, strings.Join(names[len(pos):], " "))
	}
	if len(pos) > len(names) {
		fs.Usage()
		return nil, nil, nil, fmt.Errorf("%s: unexpected arguments %q", cmd, pos[len(names):])
	}
	if err := cf.applyEnv(fs, getenv, perCall...); err != nil {
		return nil, nil, nil, err
	}
	api, done, err = cf.newClient()
	if err != nil {
		return nil, nil, nil, err
	}
	return api, pos, done, nil
}

// formatTime is a timestamp for tables.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format(time.RFC3339)
}

// formatAge is how long ago t was, to the second.
func formatAge(d time.Duration) string {
	if d < time.Second {
		return "<1s"
	}
	return d.Round(time.Second).String()
}

// orDash is s, or "-" when s is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
