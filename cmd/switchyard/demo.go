package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/switchyard/switchyard/db"
	"github.com/switchyard/switchyard/demo"
	"github.com/switchyard/switchyard/handlers"
	"github.com/switchyard/switchyard/jobs"
	"github.com/switchyard/switchyard/workflow"
)

// runDemo is the demo producer: it serves a small HTTP endpoint that
// succeeds, fails for a while, rate-limits or is missing; enqueues a mix of
// built-in tasks against it; and prints every state change until all tasks
// are final. A `switchyard serve` on the same machine works the tasks.
func runDemo(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var (
		conn        connFlags
		listen      string
		bulk        int
		runWorkflow bool
		deadline    time.Duration
	)
	fs := newFlagSet("demo", stderr)
	conn.register(fs, false)
	fs.StringVar(&listen, "demo-addr", "127.0.0.1:0", "address of the demo's HTTP endpoint, called by the http.request tasks")
	fs.IntVar(&bulk, "bulk", 2000, "number of noop tasks enqueued in one batch to measure throughput (0 to skip)")
	fs.BoolVar(&runWorkflow, "workflow", true, "also run the model deployment workflow (needs serve --demo-handlers)")
	fs.DurationVar(&deadline, "deadline", 2*time.Minute, "give up if tasks are not final by then")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if err := applyEnv(fs, getenv); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()

	pool, err := db.NewPool(ctx, db.PoolConfig{URL: conn.databaseURL, MaxConns: 4})
	if err != nil {
		return err
	}
	defer pool.Close()
	registry := jobs.NewRegistry()
	if err := handlers.RegisterBuiltins(registry, handlers.NewMux(), handlers.BuiltinConfig{}); err != nil {
		return err
	}
	if err := demo.Register(registry, nil); err != nil {
		return err
	}
	client, err := jobs.NewInsertOnlyClient(pool, registry)
	if err != nil {
		return err
	}
	engine, err := workflow.New(workflow.Config{}, workflow.Deps{Pool: pool, Jobs: client})
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("demo: listen: %w", err)
	}
	srv := &http.Server{Handler: newDemoEndpoint(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	base := "http://" + ln.Addr().String()

	run := "demo-" + strconv.FormatInt(time.Now().Unix(), 10)
	httpTask := func(path string) jobs.RawArgs {
		b, _ := json.Marshal(map[string]any{"url": base + path, "timeout": "5s"})
		return jobs.RawArgs{Type: "http.request", JSON: b}
	}
	opts := func(extra ...string) *jobs.EnqueueOptions {
		return &jobs.EnqueueOptions{Tags: append([]string{run}, extra...)}
	}
	mix := []jobs.EnqueueParams{
		{Args: handlers.NoopArgs{}, Options: opts("quick")},
		{Args: handlers.NoopArgs{}, Options: opts("quick")},
		{Args: handlers.SleepArgs{Duration: "500ms"}, Options: opts("sleepy")},
		{Args: handlers.SleepArgs{Duration: "1500ms"}, Options: opts("sleepy")},
		{Args: handlers.SleepArgs{Duration: "1s"}, Options: &jobs.EnqueueOptions{Tags: []string{run, "delayed"}, Delay: 2 * time.Second}},
		{Args: httpTask("/ok"), Options: opts("http")},
		{Args: httpTask("/flaky/a?fail=2"), Options: opts("flaky")},
		{Args: httpTask("/flaky/b?fail=1"), Options: opts("flaky")},
		{Args: httpTask("/busy"), Options: opts("rate-limited")},
		{Args: httpTask("/missing"), Options: opts("permanent")},
		{Args: httpTask("/flaky/c?fail=99"), Options: &jobs.EnqueueOptions{Tags: []string{run, "exhausted"}, MaxAttempts: 3}},
	}
	started := time.Now()
	if _, err := client.EnqueueMany(ctx, mix); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "enqueued %d tasks tagged %s; the endpoint at %s fails some of them on purpose\n\n", len(mix), run, base)
	if err := watch(ctx, client, run, stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nall %d tasks final after %s\n", len(mix), time.Since(started).Round(time.Millisecond))

	if runWorkflow {
		if err := demoWorkflow(ctx, engine, stdout); err != nil {
			return err
		}
	}

	if bulk > 0 {
		bulkTag := run + "-bulk"
		params := make([]jobs.EnqueueParams, bulk)
		for i := range params {
			params[i] = jobs.EnqueueParams{Args: handlers.NoopArgs{}, Options: &jobs.EnqueueOptions{Tags: []string{bulkTag}}}
		}
		fmt.Fprintf(stdout, "\nthroughput: enqueueing %d noop tasks in one transaction...\n", bulk)
		start := time.Now()
		if _, err := client.EnqueueMany(ctx, params); err != nil {
			return err
		}
		enqueued := time.Since(start)
		if err := waitAllFinal(ctx, client, bulkTag, bulk); err != nil {
			return err
		}
		total := time.Since(start)
		fmt.Fprintf(stdout, "enqueued in %s (%.0f tasks/s); all completed %s after the first insert (%.0f tasks/s end to end)\n",
			enqueued.Round(time.Millisecond), float64(bulk)/enqueued.Seconds(), total.Round(time.Millisecond), float64(bulk)/total.Seconds())
	}
	return nil
}

// watch prints each task's state changes until every task tagged tag is
// final, then a summary table.
func watch(ctx context.Context, client *jobs.Client, tag string, stdout io.Writer) error {
	seen := map[int64]string{}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		tasks, err := listAll(ctx, client, tag)
		if err != nil {
			return err
		}
		allFinal := len(tasks) > 0
		for _, t := range tasks {
			label := string(t.State)
			if t.State == jobs.StateInProgress || t.State == jobs.StateRetrying {
				label += fmt.Sprintf(" (attempt %d/%d)", t.Attempt, t.MaxAttempts)
			}
			if prev, ok := seen[t.ID]; !ok || prev != label {
				fmt.Fprintf(stdout, "%s  task %-5d %-13s %-13s %s\n", time.Now().Format("15:04:05.000"), t.ID, t.Type, demoTag(t), describe(t, label))
				seen[t.ID] = label
			}
			allFinal = allFinal && t.State.Final()
		}
		if allFinal {
			printSummary(stdout, tasks)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo: tasks not final in time (is `switchyard serve` running?): %w", ctx.Err())
		case <-tick.C:
		}
	}
}

func describe(t *jobs.Task, label string) string {
	switch {
	case (t.State == jobs.StateRetrying || t.State == jobs.StateFailed) && len(t.Errors) > 0:
		msg := t.Errors[len(t.Errors)-1].Error
		if len(msg) > 70 {
			msg = msg[:70] + "…"
		}
		return label + ": " + msg
	case t.State == jobs.StateScheduled:
		return label + " for " + t.ScheduledAt.Format("15:04:05.000")
	}
	return label
}

// demoTag is the task's descriptive tag (the one after the run tag).
func demoTag(t *jobs.Task) string {
	if len(t.Tags) > 1 {
		return t.Tags[1]
	}
	return ""
}

func printSummary(w io.Writer, tasks []*jobs.Task) {
	counts := map[jobs.State]int{}
	for _, t := range tasks {
		counts[t.State]++
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nSTATE\tTASKS")
	for _, s := range jobs.States {
		if counts[s] > 0 {
			fmt.Fprintf(tw, "%s\t%d\n", s, counts[s])
		}
	}
	_ = tw.Flush()
}

func listAll(ctx context.Context, client *jobs.Client, tag string) ([]*jobs.Task, error) {
	var all []*jobs.Task
	cursor := ""
	for {
		page, err := client.List(ctx, jobs.ListParams{Tags: []string{tag}, Cursor: cursor, Limit: 1000})
		if err != nil {
			return nil, err
		}
		all = append(all, page.Tasks...)
		if page.NextCursor == "" {
			return all, nil
		}
		cursor = page.NextCursor
	}
}

// waitAllFinal polls until n tasks tagged tag are final.
func waitAllFinal(ctx context.Context, client *jobs.Client, tag string, n int) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		tasks, err := listAll(ctx, client, tag)
		if err != nil {
			return err
		}
		final := 0
		for _, t := range tasks {
			if t.State.Final() {
				final++
			}
		}
		if final == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo: %d of %d bulk tasks final: %w", final, n, ctx.Err())
		case <-tick.C:
		}
	}
}

// newDemoEndpoint serves the URLs the demo's http.request tasks call:
// /ok answers 200; /flaky/{id}?fail=N answers 500 to the first N requests
// for id, then 200; /busy answers 429 with Retry-After: 1 once, then 200;
// /missing answers 404, which http.request treats as permanent.
func newDemoEndpoint() http.Handler {
	var mu sync.Mutex
	calls := map[string]int{}
	count := func(key string) int {
		mu.Lock()
		defer mu.Unlock()
		calls[key]++
		return calls[key]
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ok", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintln(w, `{"hello":"switchyard"}`)
	})
	mux.HandleFunc("GET /flaky/{id}", func(w http.ResponseWriter, r *http.Request) {
		fail, _ := strconv.Atoi(r.URL.Query().Get("fail"))
		if n := count("flaky/" + r.PathValue("id")); n <= fail {
			http.Error(w, fmt.Sprintf("flaky failure %d of %d", n, fail), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "recovered")
	})
	mux.HandleFunc("GET /busy", func(w http.ResponseWriter, r *http.Request) {
		if count("busy") == 1 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		fmt.Fprintln(w, "thanks for waiting")
	})
	mux.HandleFunc("GET /missing", func(w http.ResponseWriter, r *http.Request) {
		http.NotFound(w, r)
	})
	return mux
}

// demoWorkflow runs the model deployment workflow: it prints each step's
// status changes, approves the deployment when the approval step waits for
// it, and ends with the execution's history.
func demoWorkflow(ctx context.Context, engine *workflow.Engine, stdout io.Writer) error {
	var def workflow.Definition
	if err := json.Unmarshal(demo.DeployModelWorkflow, &def); err != nil {
		return fmt.Errorf("demo workflow: %w", err)
	}
	res, err := engine.Start(ctx, &def)
	if err != nil {
		return err
	}
	id := res.Execution.ID
	fmt.Fprintf(stdout, "\nworkflow: started execution %d (%s, %d steps); follow it with `switchyard workflow get %d`\n\n", id, def.Name, len(def.Steps), id)
	seen := map[string]string{}
	approved := false
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		exec, err := engine.Get(ctx, id)
		if err != nil {
			return err
		}
		for _, s := range exec.Steps {
			label := s.Status
			if s.Attempt > 1 {
				label += fmt.Sprintf(" (attempt %d)", s.Attempt)
			}
			if seen[s.Key] == label {
				continue
			}
			seen[s.Key] = label
			detail := ""
			if s.Error != "" {
				detail = ": " + s.Error
			}
			fmt.Fprintf(stdout, "%s  step %-16s %-8s %s%s   [%3.0f%%]\n", time.Now().Format("15:04:05.000"), s.Key, s.Kind, label, detail, exec.Progress*100)
			if s.Key == "approve" && s.Status == workflow.StepWaiting && !approved {
				fmt.Fprintf(stdout, "%s  operator approves: signal \"approval\" sent\n", time.Now().Format("15:04:05.000"))
				if _, err := engine.Signal(ctx, id, "approval", json.RawMessage(`{"approved_by":"demo-operator"}`), "demo-approval"); err != nil {
					return err
				}
				approved = true
			}
		}
		if exec.FinishedAt != nil {
			fmt.Fprintf(stdout, "\nworkflow: execution %d %s after %s (%d/%d steps final)\n", id, exec.Status,
				exec.FinishedAt.Sub(exec.CreatedAt).Round(time.Millisecond), exec.StepsFinal, exec.StepsTotal)
			history, err := engine.History(ctx, id, 0, 0)
			if err != nil {
				return err
			}
			counts := map[string]int{}
			for _, ev := range history {
				counts[ev.Type]++
			}
			fmt.Fprintf(stdout, "history: %d events %v\n", len(history), counts)
			if exec.Status != workflow.StatusCompleted {
				return fmt.Errorf("demo workflow ended %s: %s", exec.Status, exec.Error)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo workflow not finished in time (is `switchyard serve --demo-handlers` running?): %w", ctx.Err())
		case <-tick.C:
		}
	}
}
