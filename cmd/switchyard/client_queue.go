package main

import (
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

const queueUsage = `Usage:
  switchyard queue list          every queue: paused, tasks per state, age of the oldest queued task
  switchyard queue pause  NAME   stop every pod claiming tasks of the queue (needs an admin token)
  switchyard queue resume NAME   let pods claim its tasks again (needs an admin token)

They call the HTTP API of a running "switchyard serve": --server (SWITCHYARD_URL,
default ` + defaultServer + `), --token (SWITCHYARD_TOKEN), --json for the API's
JSON instead of tables. Run "switchyard queue SUBCOMMAND -h" for the flags.
`

// runQueue dispatches the queue subcommands.
func runQueue(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, queueUsage)
		return errors.New("queue: missing subcommand")
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "list":
		return runQueueList(ctx, rest, getenv, stdout, stderr)
	case "pause", "resume":
		return runQueueAction(ctx, sub, rest, getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, queueUsage)
		return nil
	}
	fmt.Fprint(stderr, queueUsage)
	return fmt.Errorf("queue: unknown subcommand %q", sub)
}

// queueView is a queue as the API returns it.
type queueView struct {
	Name      string             `json:"name"`
	Paused    bool               `json:"paused"`
	Depth     map[string]int64   `json:"depth"`
	OldestAge map[string]float64 `json:"oldest_age_seconds"`
}

func runQueueList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var cf clientFlags
	fs := newFlagSet("queue list", stderr)
	cf.register(fs, "timeout")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: switchyard queue list [flags]")
		fs.PrintDefaults()
	}
	api, _, done, err := clientCommand(fs, &cf, args, getenv, nil)
	if api == nil {
		return err
	}
	defer done()

	var raw json.RawMessage
	if err := api.do(ctx, http.MethodGet, "/v1/queues", nil, &raw); err != nil {
		return err
	}
	if cf.asJSON {
		return printJSON(stdout, raw)
	}
	var res struct {
		Queues []queueView `json:"queues"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("queue list: decode the response: %w", err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPAUSED\tQUEUED\tSCHEDULED\tIN_PROGRESS\tRETRYING\tWAITING\tOLDEST_QUEUED")
	for _, q := range res.Queues {
		paused := "no"
		if q.Paused {
			paused = "yes"
		}
		oldest := "-"
		if age, ok := q.OldestAge["queued"]; ok {
			oldest = formatAge(time.Duration(age * float64(time.Second)))
		}
		d := q.Depth
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", q.Name, paused,
			d["queued"], d["scheduled"], d["in_progress"], d["retrying"], d["waiting"], oldest)
	}
	return tw.Flush()
}

// runQueueAction runs queue pause or resume.
func runQueueAction(ctx context.Context, action string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var cf clientFlags
	fs := newFlagSet("queue "+action, stderr)
	cf.register(fs, "timeout")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: switchyard queue %s NAME [flags]\n", action)
		fs.PrintDefaults()
	}
	api, pos, done, err := clientCommand(fs, &cf, args, getenv, []string{"NAME"})
	if api == nil {
		return err
	}
	defer done()

	var raw json.RawMessage
	if err := api.do(ctx, http.MethodPost, "/v1/queues/"+url.PathEscape(pos[0])+"/"+action, nil, &raw); err != nil {
		return err
	}
	if cf.asJSON {
		return printJSON(stdout, raw)
	}
	past := map[string]string{"pause": "paused", "resume": "resumed"}[action]
	fmt.Fprintf(stdout, "queue %s %s\n", pos[0], past)
	return nil
}

// workerView is a live pod as the API returns it.
type workerView struct {
	ID      string `json:"id"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Version string `json:"version"`
	Queues  []struct {
		Name         string `json:"name"`
		ExecutorSize int    `json:"executor_size"`
		Busy         int    `json:"busy"`
	} `json:"queues"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
}

// runWorkers lists the live worker pods.
func runWorkers(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var cf clientFlags
	fs := newFlagSet("workers", stderr)
	cf.register(fs, "timeout")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: switchyard workers [flags]   the live worker pods and their queues (busy/size executors)")
		fs.PrintDefaults()
	}
	api, _, done, err := clientCommand(fs, &cf, args, getenv, nil)
	if api == nil {
		return err
	}
	defer done()

	var raw json.RawMessage
	res, err := api.send(ctx, http.MethodGet, "/v1/workers", nil, nil, &raw)
	if err != nil {
		return err
	}
	if cf.asJSON {
		return printJSON(stdout, raw)
	}
	var body struct {
		Workers []workerView `json:"workers"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return fmt.Errorf("workers: decode the response: %w", err)
	}
	// Heartbeats are the database's time; the server's Date is closer to it
	// than this machine's clock may be.
	now := time.Now()
	if d, err := http.ParseTime(res.Header.Get("Date")); err == nil {
		now = d
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tHOST\tQUEUES\tHEARTBEAT")
	for _, w := range body.Workers {
		qs := make([]string, len(w.Queues))
		for i, q := range w.Queues {
			qs[i] = q.Name + " " + strconv.Itoa(q.Busy) + "/" + strconv.Itoa(q.ExecutorSize)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s ago\n", w.ID, w.Host, orDash(strings.Join(qs, ", ")), formatAge(max(now.Sub(w.HeartbeatAt), 0)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(body.Workers) == 0 {
		fmt.Fprintln(stderr, "no live workers")
	}
	return nil
}
