package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/switchyard/switchyard/workflow"
)

const workflowUsage = `Usage:
  switchyard workflow start   FILE [--wait] [--idempotency-key K]  start an execution of the JSON definition in FILE ("-": stdin)
  switchyard workflow get     ID                  an execution and its steps
  switchyard workflow list    [flags]             list executions, newest first (--status, --name, --all)
  switchyard workflow history ID                  an execution's events, oldest first
  switchyard workflow signal  ID NAME [--payload JSON] [--key K]  send a signal to an execution
  switchyard workflow cancel  ID                  cancel an execution (running steps' handlers are cancelled)
  switchyard workflow pause   ID                  hold the steps that become ready until resume
  switchyard workflow resume  ID                  run the held steps
  switchyard workflow retry   ID                  re-run the failed, skipped and cancelled steps of a finished execution

--wait follows the execution with a progress bar until it ends, and fails
unless it completes (Ctrl-C stops the waiting, not the execution).
They call the HTTP API of a running "switchyard serve": --server (SWITCHYARD_URL,
default ` + defaultServer + `), --token (SWITCHYARD_TOKEN), --json for the API's
JSON instead of tables. Flags may come before or after the arguments.
Run "switchyard workflow SUBCOMMAND -h" for a subcommand's flags.
`

// runWorkflow dispatches the workflow subcommands.
func runWorkflow(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, workflowUsage)
		return errors.New("workflow: missing subcommand")
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "start":
		return runWorkflowStart(ctx, rest, getenv, stdout, stderr)
	case "get":
		return runWorkflowGet(ctx, rest, getenv, stdout, stderr)
	case "list":
		return runWorkflowList(ctx, rest, getenv, stdout, stderr)
	case "history":
		return runWorkflowHistory(ctx, rest, getenv, stdout, stderr)
	case "signal":
		return runWorkflowSignal(ctx, rest, getenv, stdout, stderr)
	case "cancel", "pause", "resume", "retry":
		return runWorkflowAction(ctx, sub, rest, getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, workflowUsage)
		return nil
	}
	fmt.Fprint(stderr, workflowUsage)
	return fmt.Errorf("workflow: unknown subcommand %q", sub)
}

// The API's JSON is the engine's views; decode into them directly.
type (
	executionView = workflow.Execution
	stepView      = workflow.StepState
	eventView     = workflow.Event
)

// parseExecutionID checks an ID argument.
func parseExecutionID(cmd, s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, fmt.Errorf("%s: ID %q is not an execution id (a positive integer)", cmd, s)
	}
	return id, nil
}

func executionPath(id int64) string { return "/v1/executions/" + strconv.FormatInt(id, 10) }

// workflowStdin is what FILE "-" reads; a variable for tests.
var workflowStdin io.Reader = os.Stdin

// maxDefinitionBytes bounds a definition file.
const maxDefinitionBytes = 16 << 20

// readDefinition reads a definition file and checks that it is a JSON
// object; the server checks the rest. It returns the file's bytes and the
// object's members.
func readDefinition(path string) (json.RawMessage, map[string]json.RawMessage, error) {
	name := path
	var (
		data []byte
		err  error
	)
	if path == "-" {
		name = "standard input"
		data, err = io.ReadAll(io.LimitReader(workflowStdin, maxDefinitionBytes+1))
	} else {
		var f *os.File
		if f, err = os.Open(path); err == nil {
			data, err = io.ReadAll(io.LimitReader(f, maxDefinitionBytes+1))
			f.Close()
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read the definition: %w", err)
	}
	if len(data) > maxDefinitionBytes {
		return nil, nil, fmt.Errorf("the definition in %s is larger than %d MiB", name, maxDefinitionBytes>>20)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil, fmt.Errorf("%s is empty; want a workflow definition (JSON)", name)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := lineCol(data, se.Offset)
			return nil, nil, fmt.Errorf("%s is not valid JSON: line %d, column %d: %v", name, line, col, err)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) || members == nil {
			return nil, nil, fmt.Errorf("%s: a workflow definition is a JSON object such as {\"name\":...,\"steps\":[...]}", name)
		}
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	if members == nil { // the file is "null"
		return nil, nil, fmt.Errorf("%s: a workflow definition is a JSON object such as {\"name\":...,\"steps\":[...]}", name)
	}
	return data, members, nil
}

// lineCol is the 1-based line and column of byte offset off of data (a
// json.SyntaxError's Offset is just past the bad byte).
func lineCol(data []byte, off int64) (line, col int) {
	off = min(max(off-1, 0), int64(len(data)))
	before := data[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]) + 1
	return line, col
}

func runWorkflowStart(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var (
		cf      clientFlags
		wait    bool
		idemKey string
	)
	fs := newFlagSet("workflow start", stderr)
	cf.register(fs, "timeout")
	fs.BoolVar(&wait, "wait", false, "follow the execution with a progress bar until it ends; fail unless it completes")
	fs.StringVar(&idemKey, "idempotency-key", "", "the execution's idempotency key, instead of the file's: starting it again returns the existing execution")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `Usage: switchyard workflow start FILE [--wait] [--idempotency-key K] [flags]
FILE is a workflow definition (JSON), "-" for standard input.`)
		fs.PrintDefaults()
	}
	api, pos, done, err := clientCommand(fs, &cf, args, getenv, []string{"FILE"}, "wait", "idempotency-key")
	if api == nil {
		return err
	}
	defer done()

	body, members, err := readDefinition(pos[0])
	if err != nil {
		return fmt.Errorf("workflow start: %w", err)
	}
	if flagGiven(fs, "idempotency-key") {
		if idemKey == "" {
			delete(members, "idempotency_key")
		} else {
			key, _ := json.Marshal(idemKey)
			members["idempotency_key"] = key
		}
		if body, err = json.Marshal(members); err != nil {
			return fmt.Errorf("workflow start: encode the definition: %w", err)
		}
	}

	var raw json.RawMessage
	res, err := api.send(ctx, http.MethodPost, "/v1/workflows", nil, json.RawMessage(body), &raw)
	if err != nil {
		return err
	}
	var e executionView
	if err := json.Unmarshal(raw, &e); err != nil || e.ID == 0 {
		return fmt.Errorf("workflow start: the response is not an execution: %s", compactJSON(raw))
	}
	if !wait {
		if cf.asJSON {
			return printJSON(stdout, raw)
		}
		printStarted(stdout, res, &e)
		return nil
	}

	// With --json, stdout gets the final execution only; the progress goes
	// to stderr.
	progressOut := stdout
	if cf.asJSON {
		progressOut = stderr
	} else {
		printStarted(stdout, res, &e)
	}
	final, finalRaw, err := waitExecution(ctx, api, e.ID, newProgress(progressOut, getenv), stderr)
	if err != nil {
		return err
	}
	if cf.asJSON {
		if err := printJSON(stdout, finalRaw); err != nil {
			return err
		}
	} else {
		printOutcome(stdout, final)
	}
	return outcomeError(final)
}

// printStarted is start's line about the new (or existing) execution.
func printStarted(w io.Writer, res *http.Response, e *executionView) {
	verb := "started"
	if res.StatusCode == http.StatusOK {
		verb = "already started (idempotency key " + e.IdempotencyKey + ")"
	}
	fmt.Fprintf(w, "%s execution %d: name=%s status=%s steps=%d\n", verb, e.ID, e.Name, e.Status, e.StepsTotal)
}

// flagGiven reports whether the command line set the flag.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// Waiting for an execution.
const (
	// waitPollInterval is how often --wait reads the execution.
	waitPollInterval = 250 * time.Millisecond
	// waitRetryFor is how long --wait keeps polling through failing
	// requests (a restarting server) before it gives up.
	waitRetryFor = 30 * time.Second
)

// waitExecution polls the execution until its status is final, drawing
// the progress, and returns it (decoded and raw). ctx's end stops the
// waiting only.
func waitExecution(ctx context.Context, api *apiClient, id int64, p *progress, stderr io.Writer) (*executionView, json.RawMessage, error) {
	ticker := time.NewTicker(waitPollInterval)
	defer ticker.Stop()
	var (
		last         *executionView
		failingSince time.Time
	)
	stopped := func() error {
		p.end()
		status := "running"
		if last != nil {
			status = last.Status
		}
		return fmt.Errorf("stopped waiting for execution %d, which is still %s (see switchyard workflow get %d): %w",
			id, status, id, context.Cause(ctx))
	}
	for {
		var raw json.RawMessage
		err := api.do(ctx, http.MethodGet, executionPath(id), nil, &raw)
		switch {
		case ctx.Err() != nil:
			return nil, nil, stopped()
		case err == nil:
			failingSince = time.Time{}
			var e executionView
			if err := json.Unmarshal(raw, &e); err != nil {
				p.end()
				return nil, nil, fmt.Errorf("execution %d: decode the response: %w", id, err)
			}
			last = &e
			p.update(&e)
			if workflow.ExecutionFinal(e.Status) {
				p.end()
				return &e, raw, nil
			}
		case !transient(err):
			p.end()
			return nil, nil, err
		case failingSince.IsZero():
			failingSince = time.Now()
			p.interrupt()
			fmt.Fprintf(stderr, "reading execution %d failed; trying again for %s: %v\n", id, waitRetryFor, err)
		case time.Since(failingSince) > waitRetryFor:
			p.end()
			return nil, nil, fmt.Errorf("gave up waiting for execution %d after %s of failed requests: %w", id, waitRetryFor, err)
		}
		select {
		case <-ctx.Done():
			return nil, nil, stopped()
		case <-ticker.C:
		}
	}
}

// transient reports whether a failed request may succeed when repeated:
// no response at all, or a 429 or 5xx one.
func transient(err error) bool {
	var ae *apiError
	if !errors.As(err, &ae) {
		return true
	}
	return ae.Status == http.StatusTooManyRequests || ae.Status >= 500
}

// printOutcome is the end of --wait: how the execution ended and, unless
// it completed, its steps that did not.
func printOutcome(w io.Writer, e *executionView) {
	took := ""
	if e.FinishedAt != nil {
		took = " in " + e.FinishedAt.Sub(e.CreatedAt).Round(time.Millisecond).String()
	}
	fmt.Fprintf(w, "execution %d %s%s\n", e.ID, e.Status, took)
	for _, s := range e.Steps {
		if s.Status == "failed" || (s.Status == "cancelled" && s.Error != "") {
			fmt.Fprintf(w, "  step %s %s (attempt %d): %s\n", s.Key, s.Status, s.Attempt, oneLine(s.Error, 300))
		}
	}
}

// outcomeError is nil for a completed execution and the reason otherwise.
func outcomeError(e *executionView) error {
	if e.Status == "completed" {
		return nil
	}
	if e.Error != "" {
		return fmt.Errorf("execution %d %s: %s", e.ID, e.Status, e.Error)
	}
	return fmt.Errorf("execution %d %s", e.ID, e.Status)
}

// progress draws the progress of an execution: on a terminal one line
// redrawn in place, elsewhere a line each time a step's status changes.
type progress struct {
	w       io.Writer
	tty     bool
	columns int       // terminal width
	start   time.Time // for the elapsed time on a terminal
	last    string    // the last line drawn (terminal) or state printed
	drawn   int       // width of the line on the terminal now; 0: none
}

func newProgress(w io.Writer, getenv func(string) string) *progress {
	p := &progress{w: w, tty: isTerminal(w), columns: 80, start: time.Now()}
	if n, err := strconv.Atoi(getenv("COLUMNS")); err == nil && n >= 20 {
		p.columns = n
	}
	return p
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// update shows e.
func (p *progress) update(e *executionView) {
	if !p.tty {
		state := e.Status
		for _, s := range e.Steps {
			state += " " + s.Key + "=" + s.Status
		}
		if state != p.last {
			p.last = state
			fmt.Fprintln(p.w, progressLine(e, ""))
		}
		return
	}
	line := progressLine(e, formatAge(time.Since(p.start)))
	if r := []rune(line); len(r) > p.columns-1 {
		line = string(r[:p.columns-2]) + "…"
	}
	if line == p.last && p.drawn > 0 {
		return
	}
	width := utf8.RuneCountInString(line)
	pad := ""
	if p.drawn > width {
		pad = strings.Repeat(" ", p.drawn-width)
	}
	fmt.Fprintf(p.w, "\r%s%s", line, pad)
	p.last, p.drawn = line, width
}

// interrupt ends the terminal line so that a message can follow; the next
// update starts a new one.
func (p *progress) interrupt() {
	if p.tty && p.drawn > 0 {
		fmt.Fprintln(p.w)
		p.drawn = 0
	}
}

// end finishes the drawing.
func (p *progress) end() { p.interrupt() }

// progressBarWidth is the number of cells of the bar.
const progressBarWidth = 20

// progressLine is, e.g.,
// "[#########-----------] 4/9 steps  running: configure-proxy  waiting: approve",
// with elapsed after the counts when given and the execution's status at
// the end unless it is running.
func progressLine(e *executionView, elapsed string) string {
	total, final := e.StepsTotal, e.StepsFinal
	var running, queued, waiting []string
	if len(e.Steps) > 0 {
		total, final = len(e.Steps), 0
		for _, s := range e.Steps {
			switch {
			case workflow.StepFinal(s.Status):
				final++
			case s.Status == "running":
				running = append(running, s.Key)
			case s.Status == "ready":
				queued = append(queued, s.Key)
			case s.Status == "waiting":
				waiting = append(waiting, s.Key)
			}
		}
	}
	filled := 0
	if total > 0 {
		filled = min(progressBarWidth*final/total, progressBarWidth)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[%s%s] %d/%d steps", strings.Repeat("#", filled), strings.Repeat("-", progressBarWidth-filled), final, total)
	if elapsed != "" {
		b.WriteString("  " + elapsed)
	}
	for _, g := range []struct {
		name string
		keys []string
	}{{"running", running}, {"queued", queued}, {"waiting", waiting}} {
		if len(g.keys) > 0 {
			fmt.Fprintf(&b, "  %s: %s", g.name, strings.Join(g.keys, ", "))
		}
	}
	if e.Status != "running" {
		b.WriteString("  " + e.Status)
	}
	return b.String()
}

// oneLine is the first line of s, at most n runes, marked when cut.
func oneLine(s string, n int) string {
	cut := false
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s, cut = strings.TrimRight(s[:i], "\r"), true
	}
	if r := []rune(s); len(r) > n {
		s, cut = string(r[:n]), true
	}
	if cut {
		s += "…"
	}
	return s
}

func runWorkflowGet(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var cf clientFlags
	fs := newFlagSet("workflow get", stderr)
	cf.register(fs, "timeout")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: switchyard workflow get ID [flags]   an execution and its steps (errors in full with --json)")
		fs.PrintDefaults()
	}
	api, pos, done, err := clientCommand(fs, &cf, args, getenv, []string{"ID"})
	if api == nil {
		return err
	}
	defer done()
	id, err := parseExecutionID("workflow get", pos[0])
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := api.do(ctx, http.MethodGet, executionPath(id), nil, &raw); err != nil {
		return err
	}
	if cf.asJSON {
		return printJSON(stdout, raw)
	}
	var e executionView
	if err := json.Unmarshal(raw, &e); err != nil {
		return fmt.Errorf("workflow get: decode the response: %w", err)
	}
	return printExecution(stdout, &e)
}

// printExecution writes an execution as "field: value" lines, then its
// steps as a table.
func printExecution(w io.Writer, e *executionView) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	line("id", strconv.FormatInt(e.ID, 10))
	line("name", e.Name)
	line("status", e.Status)
	line("progress", fmt.Sprintf("%d/%d steps (%d%%)", e.StepsFinal, e.StepsTotal, int(e.Progress*100)))
	line("error", orDash(oneLine(e.Error, 300)))
	line("idempotency_key", orDash(e.IdempotencyKey))
	parent := "-"
	if e.ParentID != nil {
		parent = fmt.Sprintf("%d (step %s)", *e.ParentID, e.ParentStep)
	}
	line("parent", parent)
	line("timeout", orDash(e.Timeout))
	line("created", formatTime(e.CreatedAt))
	line("finished", timeOrDash(e.FinishedAt))
	line("input", compactJSON(e.Input))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(e.Steps) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tKIND\tSTATUS\tATTEMPT\tSTARTED\tFINISHED\tERROR")
	for _, s := range e.Steps {
		attempt := "-"
		if s.Attempt > 0 {
			attempt = strconv.Itoa(s.Attempt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Key, s.Kind, s.Status, attempt,
			timeOrDash(s.StartedAt), timeOrDash(s.FinishedAt), orDash(oneLine(s.Error, 100)))
	}
	return tw.Flush()
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return formatTime(*t)
}

// executionPage is one page of GET /v1/executions, its executions kept raw
// for --json.
type executionPage struct {
	Executions []json.RawMessage `json:"executions"`
	NextCursor string            `json:"next_cursor"`
}

func runWorkflowList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var (
		cf       clientFlags
		statuses stringsFlag
		name     string
		limit    int
		cursor   string
		all      bool
	)
	fs := newFlagSet("workflow list", stderr)
	cf.register(fs, "timeout")
	fs.Var(&statuses, "status", "only executions in this status (repeatable or comma-separated): pending, running, paused, completed, failed, cancelled, timed_out")
	fs.StringVar(&name, "name", "", "only executions of workflows with this name")
	fs.IntVar(&limit, "limit", 0, "page size (default: the server's)")
	fs.StringVar(&cursor, "cursor", "", "continue from a previous page's next cursor")
	fs.BoolVar(&all, "all", false, "follow the cursor through every page")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: switchyard workflow list [flags]   executions, newest first")
		fs.PrintDefaults()
	}
	api, _, done, err := clientCommand(fs, &cf, args, getenv, nil, "status", "name", "limit", "cursor", "all")
	if api == nil {
		return err
	}
	defer done()

	q := url.Values{}
	for _, s := range statuses {
		for _, st := range strings.Split(s, ",") {
			if st = strings.TrimSpace(st); st != "" {
				q.Add("status", st)
			}
		}
	}
	if name != "" {
		q.Set("name", name)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}

	var (
		execs []json.RawMessage
		next  = cursor
		first json.RawMessage // the first page's body, printed as is for --json without --all
	)
	for page := 0; ; page++ {
		if next != "" {
			q.Set("cursor", next)
		}
		path := "/v1/executions"
		if enc := q.Encode(); enc != "" {
			path += "?" + enc
		}
		var raw json.RawMessage
		if err := api.do(ctx, http.MethodGet, path, nil, &raw); err != nil {
			return err
		}
		var p executionPage
		if err := json.Unmarshal(raw, &p); err != nil {
			return fmt.Errorf("workflow list: decode the response: %w", err)
		}
		if page == 0 {
			first = raw
		}
		execs = append(execs, p.Executions...)
		if !all || p.NextCursor == "" {
			next = p.NextCursor
			break
		}
		if p.NextCursor == next {
			return fmt.Errorf("workflow list: the server returned the same cursor twice (%q)", next)
		}
		next = p.NextCursor
	}

	if cf.asJSON {
		if !all {
			return printJSON(stdout, first)
		}
		if execs == nil {
			execs = []json.RawMessage{}
		}
		merged, err := json.Marshal(executionPage{Executions: execs})
		if err != nil {
			return err
		}
		return printJSON(stdout, merged)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSTATUS\tSTEPS\tCREATED\tFINISHED")
	for _, raw := range execs {
		var e executionView
		if err := json.Unmarshal(raw, &e); err != nil {
			return fmt.Errorf("workflow list: decode an execution: %w", err)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d/%d\t%s\t%s\n", e.ID, e.Name, e.Status, e.StepsFinal, e.StepsTotal,
			formatTime(e.CreatedAt), timeOrDash(e.FinishedAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(stderr, "more executions: add --cursor %s, or --all for every page\n", next)
	}
	return nil
}

// historyPageSize is the page size history asks for; a shorter page is
// the last.
const historyPageSize = 500

func runWorkflowHistory(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var cf clientFlags
	fs := newFlagSet("workflow history", stderr)
	cf.register(fs, "timeout")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: switchyard workflow history ID [flags]   an execution's events, oldest first")
		fs.PrintDefaults()
	}
	api, pos, done, err := clientCommand(fs, &cf, args, getenv, []string{"ID"})
	if api == nil {
		return err
	}
	defer done()
	id, err := parseExecutionID("workflow history", pos[0])
	if err != nil {
		return err
	}

	events := []json.RawMessage{}
	for after := int64(0); ; {
		q := url.Values{"limit": {strconv.Itoa(historyPageSize)}}
		if after > 0 {
			q.Set("after", strconv.FormatInt(after, 10))
		}
		var page struct {
			Events []json.RawMessage `json:"events"`
		}
		if err := api.do(ctx, http.MethodGet, executionPath(id)+"/history?"+q.Encode(), nil, &page); err != nil {
			return err
		}
		events = append(events, page.Events...)
		if len(page.Events) < historyPageSize {
			break
		}
		var lastEv eventView
		if err := json.Unmarshal(page.Events[len(page.Events)-1], &lastEv); err != nil {
			return fmt.Errorf("workflow history: decode an event: %w", err)
		}
		if lastEv.ID <= after {
			return fmt.Errorf("workflow history: the server returned event %d again", lastEv.ID)
		}
		after = lastEv.ID
	}

	if cf.asJSON {
		merged, err := json.Marshal(struct {
			Events []json.RawMessage `json:"events"`
		}{events})
		if err != nil {
			return err
		}
		return printJSON(stdout, merged)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tTYPE\tSTEP\tDATA")
	for _, raw := range events {
		var ev eventView
		if err := json.Unmarshal(raw, &ev); err != nil {
			return fmt.Errorf("workflow history: decode an event: %w", err)
		}
		at := "-"
		if !ev.At.IsZero() {
			at = ev.At.Local().Format("2006-01-02T15:04:05.000Z07:00")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", at, ev.Type, orDash(ev.Step), oneLine(compactJSON(ev.Data), 200))
	}
	return tw.Flush()
}

func runWorkflowSignal(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var (
		cf      clientFlags
		payload string
		key     string
	)
	fs := newFlagSet("workflow signal", stderr)
	cf.register(fs, "timeout")
	fs.StringVar(&payload, "payload", "", "the signal's payload (JSON); the output of the wait step it completes (default: null)")
	fs.StringVar(&key, "key", "", "idempotency key: a second signal with the key is ignored")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: switchyard workflow signal ID NAME [--payload JSON] [--key K] [flags]")
		fs.PrintDefaults()
	}
	api, pos, done, err := clientCommand(fs, &cf, args, getenv, []string{"ID", "NAME"}, "payload", "key")
	if api == nil {
		return err
	}
	defer done()
	id, err := parseExecutionID("workflow signal", pos[0])
	if err != nil {
		return err
	}
	name := pos[1]
	var req struct {
		Payload        json.RawMessage `json:"payload,omitempty"`
		IdempotencyKey string          `json:"idempotency_key,omitempty"`
	}
	if payload != "" {
		if !json.Valid([]byte(payload)) {
			return errors.New(`workflow signal: --payload is not valid JSON (a string needs quotes: --payload '"yes"')`)
		}
		req.Payload = json.RawMessage(payload)
	}
	req.IdempotencyKey = key

	var raw json.RawMessage
	if err := api.do(ctx, http.MethodPost, executionPath(id)+"/signals/"+url.PathEscape(name), &req, &raw); err != nil {
		return err
	}
	if cf.asJSON {
		return printJSON(stdout, raw)
	}
	var res struct {
		Duplicate  bool   `json:"duplicate"`
		ConsumedBy string `json:"consumed_by"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("workflow signal: decode the response: %w", err)
	}
	switch {
	case res.Duplicate:
		fmt.Fprintf(stdout, "signal %s to execution %d: ignored, its key %q was used before\n", name, id, key)
	case res.ConsumedBy != "":
		fmt.Fprintf(stdout, "signal %s to execution %d: completed step %s\n", name, id, res.ConsumedBy)
	default:
		fmt.Fprintf(stdout, "signal %s to execution %d: kept until a step waits for it\n", name, id)
	}
	return nil
}

// runWorkflowAction runs workflow cancel, pause, resume or retry.
func runWorkflowAction(ctx context.Context, action string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var cf clientFlags
	fs := newFlagSet("workflow "+action, stderr)
	cf.register(fs, "timeout")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: switchyard workflow %s ID [flags]\n", action)
		fs.PrintDefaults()
	}
	api, pos, done, err := clientCommand(fs, &cf, args, getenv, []string{"ID"})
	if api == nil {
		return err
	}
	defer done()
	id, err := parseExecutionID("workflow "+action, pos[0])
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := api.do(ctx, http.MethodPost, executionPath(id)+"/"+action, nil, &raw); err != nil {
		return err
	}
	if cf.asJSON {
		return printJSON(stdout, raw)
	}
	var e executionView
	if err := json.Unmarshal(raw, &e); err != nil {
		return fmt.Errorf("workflow %s: decode the response: %w", action, err)
	}
	fmt.Fprintf(stdout, "execution %d: %s\n", e.ID, e.Status)
	return nil
}
