package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

const taskUsage = `Usage:
  switchyard task enqueue TYPE [--args JSON] [flags]  enqueue a task
  switchyard task get     ID                          show a task: state, attempts, errors, output
  switchyard task list    [flags]                     list tasks, oldest first (--state, --type, --queue, --tag, --all)
  switchyard task cancel  ID                          cancel a task (a running handler's context is cancelled)
  switchyard task retry   ID                          run a failed, cancelled or completed task again

They call the HTTP API of a running "switchyard serve": --server (SWITCHYARD_URL,
default ` + defaultServer + `), --token (SWITCHYARD_TOKEN), --json for the API's
JSON instead of tables. Flags may come before or after the arguments.
Run "switchyard task SUBCOMMAND -h" for a subcommand's flags.
`

// runTask dispatches the task subcommands.
func runTask(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, taskUsage)
		return errors.New("task: missing subcommand")
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "enqueue":
		return runTaskEnqueue(ctx, rest, getenv, stdout, stderr)
	case "get":
		return runTaskAction(ctx, "get", rest, getenv, stdout, stderr)
	case "list":
		return runTaskList(ctx, rest, getenv, stdout, stderr)
	case "cancel":
		return runTaskAction(ctx, "cancel", rest, getenv, stdout, stderr)
	case "retry":
		return runTaskAction(ctx, "retry", rest, getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, taskUsage)
		return nil
	}
	fmt.Fprint(stderr, taskUsage)
	return fmt.Errorf("task: unknown subcommand %q", sub)
}

// taskView is a task as the API returns it.
type taskView struct {
	ID             int64           `json:"id"`
	Type           string          `json:"type"`
	Queue          string          `json:"queue"`
	State          string          `json:"state"`
	Args           json.RawMessage `json:"args"`
	Priority       int             `json:"priority"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"max_attempts"`
	Tags           []string        `json:"tags"`
	Timeout        string          `json:"timeout"`
	IdempotencyKey string          `json:"idempotency_key"`
	Errors         []struct {
		Attempt int       `json:"attempt"`
		At      time.Time `json:"at"`
		Error   string    `json:"error"`
		Trace   string    `json:"trace"`
	} `json:"errors"`
	Output      json.RawMessage `json:"output"`
	CreatedAt   time.Time       `json:"created_at"`
	ScheduledAt time.Time       `json:"scheduled_at"`
	AttemptedAt *time.Time      `json:"attempted_at"`
	FinalizedAt *time.Time      `json:"finalized_at"`
	Snoozes     int             `json:"snoozes"`
}

// enqueueRequest is the body of POST /v1/tasks; unset options are left
// out so the type's defaults apply.
type enqueueRequest struct {
	Type           string          `json:"type"`
	Args           json.RawMessage `json:"args,omitempty"`
	Queue          string          `json:"queue,omitempty"`
	Priority       int             `json:"priority,omitempty"`
	RunAt          string          `json:"run_at,omitempty"`
	Delay          string          `json:"delay,omitempty"`
	MaxAttempts    int             `json:"max_attempts,omitempty"`
	Timeout        string          `json:"timeout,omitempty"`
	Tags           []string        `json:"tags,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

func runTaskEnqueue(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var (
		cf                      clientFlags
		req                     enqueueRequest
		argsJSON, runAt, reqKey string
		delay, timeout          time.Duration
		tags                    stringsFlag
	)
	fs := newFlagSet("task enqueue", stderr)
	// --timeout is the task's attempt timeout here, as in the API body and
	// `switchyard enqueue`; the HTTP request's is --request-timeout.
	cf.register(fs, "request-timeout")
	fs.StringVar(&argsJSON, "args", "", "task arguments as a JSON object (default: none, i.e. {})")
	fs.StringVar(&req.Queue, "queue", "", "queue (default: the type's queue)")
	fs.IntVar(&req.Priority, "priority", 0, "priority 1 (first) to 4 (default: the type's)")
	fs.DurationVar(&delay, "delay", 0, "run after this delay")
	fs.StringVar(&runAt, "run-at", "", "run at this RFC 3339 time, e.g. 2026-01-02T15:04:05Z")
	fs.IntVar(&req.MaxAttempts, "max-attempts", 0, "attempts before failing (default: the type's retry policy)")
	fs.DurationVar(&timeout, "timeout", 0, "timeout of each attempt (default: the type's)")
	fs.Var(&tags, "tag", "tag the task (repeatable)")
	fs.StringVar(&req.IdempotencyKey, "idempotency-key", "", "the task's idempotency key: enqueueing it again returns the existing task")
	fs.StringVar(&reqKey, "request-key", "", "Idempotency-Key header: a repeat of this exact request gets the first response again")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: switchyard task enqueue TYPE [--args JSON] [flags]")
		fs.PrintDefaults()
	}
	api, pos, done, err := clientCommand(fs, &cf, args, getenv, []string{"TYPE"},
		"args", "queue", "priority", "delay", "run-at", "max-attempts", "timeout", "tag", "idempotency-key", "request-key")
	if api == nil {
		return err
	}
	defer done()

	req.Type = pos[0]
	if argsJSON != "" {
		if !json.Valid([]byte(argsJSON)) {
			return errors.New("task enqueue: --args is not valid JSON")
		}
		req.Args = json.RawMessage(argsJSON)
	}
	if delay != 0 {
		req.Delay = delay.String()
	}
	if timeout != 0 {
		req.Timeout = timeout.String()
	}
	if runAt != "" {
		t, err := time.Parse(time.RFC3339, runAt)
		if err != nil {
			return fmt.Errorf("task enqueue: --run-at %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", runAt)
		}
		req.RunAt = t.Format(time.RFC3339Nano)
	}
	req.Tags = tags
	var header http.Header
	if reqKey != "" {
		header = http.Header{"Idempotency-Key": {reqKey}}
	}

	var raw json.RawMessage
	res, err := api.send(ctx, http.MethodPost, "/v1/tasks", header, &req, &raw)
	if err != nil {
		return err
	}
	if cf.asJSON {
		return printJSON(stdout, raw)
	}
	var t taskView
	if err := json.Unmarshal(raw, &t); err != nil {
		return fmt.Errorf("task enqueue: decode the response: %w", err)
	}
	verb := "enqueued"
	switch {
	case res.Header.Get("Idempotent-Replayed") == "true":
		verb = "already enqueued (request key replayed)"
	case res.StatusCode == http.StatusOK:
		verb = "already enqueued (idempotency key)"
	}
	fmt.Fprintf(stdout, "%s task %d: type=%s queue=%s state=%s scheduled_at=%s\n",
		verb, t.ID, t.Type, t.Queue, t.State, t.ScheduledAt.Format(time.RFC3339))
	return nil
}

// runTaskAction runs task get, cancel or retry.
func runTaskAction(ctx context.Context, action string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var cf clientFlags
	fs := newFlagSet("task "+action, stderr)
	cf.register(fs, "timeout")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: switchyard task %s ID [flags]\n", action)
		fs.PrintDefaults()
	}
	api, pos, done, err := clientCommand(fs, &cf, args, getenv, []string{"ID"})
	if api == nil {
		return err
	}
	defer done()
	id, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil || id < 1 {
		return fmt.Errorf("task %s: ID %q is not a task id (a positive integer)", action, pos[0])
	}

	method, path := http.MethodPost, "/v1/tasks/"+strconv.FormatInt(id, 10)
	if action == "get" {
		method = http.MethodGet
	} else {
		path += "/" + action
	}
	var raw json.RawMessage
	if err := api.do(ctx, method, path, nil, &raw); err != nil {
		return err
	}
	if cf.asJSON {
		return printJSON(stdout, raw)
	}
	var t taskView
	if err := json.Unmarshal(raw, &t); err != nil {
		return fmt.Errorf("task %s: decode the response: %w", action, err)
	}
	if action != "get" {
		fmt.Fprintf(stdout, "task %d: %s\n", t.ID, t.State)
		return nil
	}
	return printTask(stdout, &t)
}

// printTask writes one task as "field: value" lines.
func printTask(w io.Writer, t *taskView) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	timePtr := func(p *time.Time) string {
		if p == nil {
			return "-"
		}
		return formatTime(*p)
	}
	line("id", strconv.FormatInt(t.ID, 10))
	line("type", t.Type)
	line("queue", t.Queue)
	line("state", t.State)
	line("priority", strconv.Itoa(t.Priority))
	line("attempt", fmt.Sprintf("%d/%d", t.Attempt, t.MaxAttempts))
	line("tags", orDash(strings.Join(t.Tags, ", ")))
	line("timeout", orDash(t.Timeout))
	line("idempotency_key", orDash(t.IdempotencyKey))
	line("created", formatTime(t.CreatedAt))
	line("scheduled", formatTime(t.ScheduledAt))
	line("attempted", timePtr(t.AttemptedAt))
	line("finalized", timePtr(t.FinalizedAt))
	line("snoozes", strconv.Itoa(t.Snoozes))
	line("args", compactJSON(t.Args))
	line("output", compactJSON(t.Output))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(t.Errors) > 0 {
		fmt.Fprintln(w, "errors:")
		for _, e := range t.Errors {
			msg := strings.ReplaceAll(e.Error, "\n", "\n    ")
			fmt.Fprintf(w, "  attempt %d at %s: %s\n", e.Attempt, formatTime(e.At), msg)
			if e.Trace != "" {
				fmt.Fprintln(w, "    (panic stack trace: see --json)")
			}
		}
	}
	return nil
}

// compactJSON is raw on one line, "-" when empty.
func compactJSON(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return "-"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

// taskPage is one page of GET /v1/tasks, its tasks kept raw for --json.
type taskPage struct {
	Tasks      []json.RawMessage `json:"tasks"`
	NextCursor string            `json:"next_cursor"`
}

func runTaskList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var (
		cf                         clientFlags
		states, types, queues, tgs stringsFlag
		limit                      int
		cursor                     string
		all                        bool
	)
	fs := newFlagSet("task list", stderr)
	cf.register(fs, "timeout")
	fs.Var(&states, "state", "only tasks in this state (repeatable or comma-separated): queued, scheduled, in_progress, retrying, completed, failed, cancelled, waiting")
	fs.Var(&types, "type", "only tasks of this type (repeatable)")
	fs.Var(&queues, "queue", "only tasks on this queue (repeatable)")
	fs.Var(&tgs, "tag", "only tasks with this tag (repeatable)")
	fs.IntVar(&limit, "limit", 0, "page size, 1 to 1000 (default: the server's, 100)")
	fs.StringVar(&cursor, "cursor", "", "continue from a previous page's next cursor")
	fs.BoolVar(&all, "all", false, "follow the cursor through every page")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: switchyard task list [flags]")
		fs.PrintDefaults()
	}
	api, _, done, err := clientCommand(fs, &cf, args, getenv, nil,
		"state", "type", "queue", "tag", "limit", "cursor", "all")
	if api == nil {
		return err
	}
	defer done()

	q := url.Values{}
	for _, s := range states {
		for _, st := range strings.Split(s, ",") {
			if st = strings.TrimSpace(st); st != "" {
				q.Add("state", st)
			}
		}
	}
	q["type"], q["queue"], q["tag"] = []string(types), []string(queues), []string(tgs)
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}

	var (
		tasks []json.RawMessage
		next  = cursor
		first json.RawMessage // the first page's body, printed as is for --json without --all
	)
	for page := 0; ; page++ {
		if next != "" {
			q.Set("cursor", next)
		}
		path := "/v1/tasks"
		if enc := q.Encode(); enc != "" {
			path += "?" + enc
		}
		var raw json.RawMessage
		if err := api.do(ctx, http.MethodGet, path, nil, &raw); err != nil {
			return err
		}
		var p taskPage
		if err := json.Unmarshal(raw, &p); err != nil {
			return fmt.Errorf("task list: decode the response: %w", err)
		}
		if page == 0 {
			first = raw
		}
		tasks = append(tasks, p.Tasks...)
		if !all || p.NextCursor == "" {
			next = p.NextCursor
			break
		}
		if p.NextCursor == next {
			return fmt.Errorf("task list: the server returned the same cursor twice (%q)", next)
		}
		next = p.NextCursor
	}

	if cf.asJSON {
		if !all {
			return printJSON(stdout, first)
		}
		if tasks == nil {
			tasks = []json.RawMessage{}
		}
		merged, err := json.Marshal(taskPage{Tasks: tasks})
		if err != nil {
			return err
		}
		return printJSON(stdout, merged)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTYPE\tQUEUE\tSTATE\tATTEMPT\tCREATED")
	for _, raw := range tasks {
		var t taskView
		if err := json.Unmarshal(raw, &t); err != nil {
			return fmt.Errorf("task list: decode a task: %w", err)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\t%s\n", t.ID, t.Type, t.Queue, t.State, t.Attempt, t.MaxAttempts, formatTime(t.CreatedAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(stderr, "more tasks: add --cursor %s, or --all for every page\n", next)
	}
	return nil
}
