// Package bench measures Switchyard against River, the engine underneath
// it, in one run on one machine: throughput of no-op tasks, enqueue-to-start
// latency, workflow step throughput, a worker process's memory at 1,000
// concurrent workers, and claim throughput with a large backlog. Every
// figure is reported next to a baseline measured in the same run, because
// absolute numbers on a shared machine say little; the ratios are what
// count.
//
// Each scenario works in databases of its own, created on the configured
// Postgres server from a template migrated at the start of the run and
// dropped at the end, so a run never touches the user's data and two runs
// do not interfere.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// Scenario names, in the order they run.
const (
	ScenarioThroughput = "throughput"
	ScenarioLatency    = "latency"
	ScenarioWorkflow   = "workflow"
	ScenarioMemory     = "memory"
	ScenarioScale      = "scale"
)

// Scenarios lists every scenario in run order.
var Scenarios = []string{ScenarioThroughput, ScenarioLatency, ScenarioWorkflow, ScenarioMemory, ScenarioScale}

// Mode selects the sizes of a run.
type Mode string

// Modes.
const (
	// ModeFull is the standard set (make bench), within about ten minutes.
	ModeFull Mode = "full"
	// ModeQuick is a smaller set (make bench-quick), within about two.
	ModeQuick Mode = "quick"
	// ModeTiny is a smoke run of seconds (about 1,000 tasks per scenario):
	// it proves the scenarios work; its figures mean nothing.
	ModeTiny Mode = "tiny"
)

// Sizes are the amounts of work of each scenario.
type Sizes struct {
	// ThroughputTasks is the number of no-op tasks each variant works.
	ThroughputTasks int
	// ThroughputRounds is how often each variant runs; rounds interleave
	// the variants and each figure is the best of its rounds (interference
	// on a shared machine only ever slows a round down).
	ThroughputRounds int
	// ThroughputTriggers adds the variant "raw River on Switchyard's
	// schema", which prices Switchyard's task-event triggers.
	ThroughputTriggers bool
	// LatencyRates are the producer's rates in tasks per second, each run
	// for LatencyDuration.
	LatencyRates    []int
	LatencyDuration time.Duration
	// FanOutWidth is the number of parallel steps between the root and the
	// join of the fan-out/fan-in workflow (at most 998).
	FanOutWidth int
	// FanOutRuns is how many of those executions run at once.
	FanOutRuns int
	// Chains and ChainLength shape the linear-chain workflows.
	Chains, ChainLength int
	// MemoryWorkers is the executor size of the worker process, all kept
	// busy by sleep tasks of MemorySleep.
	MemoryWorkers int
	MemorySleep   time.Duration
	// ScaleBacklog is the number of tasks queued ahead; ScaleClaims is the
	// number of claims timed, with that backlog and with an empty queue.
	ScaleBacklog int
	ScaleClaims  int
	// ScaleRounds is how often both run, interleaved; the figure is the
	// ratio of the bests.
	ScaleRounds int
}

// SizesFor returns the sizes of a mode.
func SizesFor(m Mode) Sizes {
	switch m {
	case ModeTiny:
		return Sizes{
			ThroughputTasks: 1000, ThroughputRounds: 1, ThroughputTriggers: true,
			LatencyRates: []int{200}, LatencyDuration: time.Second,
			FanOutWidth: 50, FanOutRuns: 1, Chains: 10, ChainLength: 5,
			MemoryWorkers: 50, MemorySleep: 3 * time.Second,
			ScaleBacklog: 5000, ScaleClaims: 1000, ScaleRounds: 1,
		}
	case ModeQuick:
		return Sizes{
			ThroughputTasks: 50_000, ThroughputRounds: 3, ThroughputTriggers: false,
			LatencyRates: []int{200}, LatencyDuration: 5 * time.Second,
			FanOutWidth: 500, FanOutRuns: 1, Chains: 50, ChainLength: 10,
			MemoryWorkers: 1000, MemorySleep: 6 * time.Second,
			ScaleBacklog: 100_000, ScaleClaims: 20_000, ScaleRounds: 2,
		}
	}
	return Sizes{
		ThroughputTasks: 100_000, ThroughputRounds: 3, ThroughputTriggers: true,
		LatencyRates: []int{200, 2000}, LatencyDuration: 10 * time.Second,
		FanOutWidth: 998, FanOutRuns: 2, Chains: 200, ChainLength: 10,
		MemoryWorkers: 1000, MemorySleep: 10 * time.Second,
		ScaleBacklog: 1_000_000, ScaleClaims: 50_000, ScaleRounds: 3,
	}
}

// Config configures a run.
type Config struct {
	// DatabaseURL names the Postgres server (and a database on it to
	// connect to) on which the run creates and drops its own databases.
	DatabaseURL string
	// RedisURL is the Redis of the guard and the workflow cache; the run
	// uses keys under a prefix of its own and deletes them at the end.
	RedisURL string
	// Mode selects the sizes; Sizes, when set, overrides them.
	Mode  Mode
	Sizes *Sizes
	// Scenarios to run, in the order of Scenarios; empty runs all.
	Scenarios []string
	// Binary is the switchyard executable the memory scenario starts as a
	// worker process (switchyard serve); empty skips that scenario.
	Binary string
	// Progress receives progress lines; nil discards them.
	Progress io.Writer
	// Version is the build version recorded in the report.
	Version string
	// ProfileDir, when set, receives a CPU profile of the bench process for
	// each timed measurement (<scenario>.<variant>.pprof).
	ProfileDir string
}

// Report is the result of a run: the JSON document of --json. Its field
// names are stable; see the README's Performance section.
type Report struct {
	// Schema identifies the document's format.
	Schema     string    `json:"schema"`
	Version    string    `json:"version"`
	Mode       Mode      `json:"mode"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	Seconds    float64   `json:"seconds"`
	Machine    Machine   `json:"machine"`
	// Scenarios lists each scenario that was asked for, with its settings
	// and its error if it failed.
	Scenarios []ScenarioResult `json:"scenarios"`
	Figures   []Figure         `json:"figures"`
}

// ReportSchema is the value of Report.Schema.
const ReportSchema = "switchyard-bench/1"

// Machine describes where the run happened.
type Machine struct {
	CPUs            int    `json:"cpus"`
	MemoryBytes     int64  `json:"memory_bytes"`
	OS              string `json:"os"`
	Arch            string `json:"arch"`
	GoVersion       string `json:"go_version"`
	PostgresVersion string `json:"postgres_version"`
	// PostgresFsync is the server's fsync setting ("off" on the local
	// development instance).
	PostgresFsync string `json:"postgres_fsync"`
	RedisVersion  string `json:"redis_version"`
}

// ScenarioResult is one scenario's outcome.
type ScenarioResult struct {
	Name    string         `json:"name"`
	Seconds float64        `json:"seconds"`
	Params  map[string]any `json:"params,omitempty"`
	// Error is set when the scenario failed; its figures are missing.
	Error string `json:"error,omitempty"`
	// Skipped explains why a scenario did not run.
	Skipped string `json:"skipped,omitempty"`
}

// Figure is one measured number with its same-run baseline.
type Figure struct {
	// ID is the figure's stable name, e.g. "throughput.full_pipeline".
	ID       string `json:"id"`
	Scenario string `json:"scenario"`
	// Label is the human description of the table.
	Label string  `json:"label"`
	Unit  string  `json:"unit"`
	Value float64 `json:"value"`
	// Baseline is the reference measured in the same run and BaselineLabel
	// says what it is; Ratio is Value ÷ Baseline. All three are absent for
	// figures without a baseline.
	Baseline      *float64 `json:"baseline,omitempty"`
	BaselineLabel string   `json:"baseline_label,omitempty"`
	Ratio         *float64 `json:"ratio,omitempty"`
	// Target is the target for this figure, if it has one; Met says
	// whether this run reached it.
	Target *Target `json:"target,omitempty"`
	Met    *bool   `json:"met,omitempty"`
}

// Target is a goal for a figure: On ("value" or "ratio") Op ("<=" or
// ">=") Threshold, in the figure's unit for a value.
type Target struct {
	On        string  `json:"on"`
	Op        string  `json:"op"`
	Threshold float64 `json:"threshold"`
}

func (t *Target) String() string {
	if t == nil {
		return ""
	}
	op := map[string]string{"<=": "≤", ">=": "≥"}[t.Op]
	return fmt.Sprintf("%s %s %s", t.On, op, trimFloat(t.Threshold))
}

func (t *Target) met(f *Figure) *bool {
	if t == nil {
		return nil
	}
	v := f.Value
	if t.On == "ratio" {
		if f.Ratio == nil {
			return nil
		}
		v = *f.Ratio
	}
	ok := v >= t.Threshold
	if t.Op == "<=" {
		ok = v <= t.Threshold
	}
	return &ok
}

func atLeast(on string, x float64) *Target { return &Target{On: on, Op: ">=", Threshold: x} }
func atMost(on string, x float64) *Target  { return &Target{On: on, Op: "<=", Threshold: x} }

// Run runs the configured scenarios and returns the report. A failing
// scenario is recorded in the report and the run goes on; Run returns an
// error only when it cannot run at all (no database server) or ctx ends.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Mode == "" {
		cfg.Mode = ModeFull
	}
	sizes := SizesFor(cfg.Mode)
	if cfg.Sizes != nil {
		sizes = *cfg.Sizes
	}
	selected, err := selectScenarios(cfg.Scenarios)
	if err != nil {
		return nil, err
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	r := &runner{cfg: cfg, sizes: sizes, out: progress}
	rep := &Report{Schema: ReportSchema, Version: cfg.Version, Mode: cfg.Mode, StartedAt: time.Now().UTC()}

	if err := r.open(ctx); err != nil {
		return nil, err
	}
	defer r.close()
	rep.Machine = r.machine(ctx)
	r.logf("run %s on %d CPUs (Postgres %s, fsync=%s): %s", cfg.Mode, rep.Machine.CPUs,
		rep.Machine.PostgresVersion, rep.Machine.PostgresFsync, strings.Join(selected, ", "))

	for _, name := range selected {
		if ctx.Err() != nil {
			break
		}
		res := ScenarioResult{Name: name, Params: map[string]any{}}
		start := time.Now()
		r.scenario = name
		var figs []Figure
		var err error
		switch name {
		case ScenarioThroughput:
			figs, err = r.throughput(ctx, res.Params)
		case ScenarioLatency:
			figs, err = r.latency(ctx, res.Params)
		case ScenarioWorkflow:
			figs, err = r.workflows(ctx, res.Params)
		case ScenarioMemory:
			if cfg.Binary == "" {
				res.Skipped = "no switchyard binary to run as the worker process"
				break
			}
			figs, err = r.memory(ctx, res.Params)
		case ScenarioScale:
			figs, err = r.scale(ctx, res.Params)
		}
		res.Seconds = round(time.Since(start).Seconds(), 1)
		if err != nil {
			res.Error = err.Error()
			r.logf("failed after %.1fs: %v", res.Seconds, err)
		} else if res.Skipped != "" {
			r.logf("skipped: %s", res.Skipped)
		} else {
			r.logf("done in %.1fs", res.Seconds)
		}
		for i := range figs {
			figs[i].Scenario = name
			figs[i].finish()
			r.figures[figs[i].ID] = figs[i]
		}
		rep.Figures = append(rep.Figures, figs...)
		rep.Scenarios = append(rep.Scenarios, res)
	}
	r.scenario = ""
	rep.FinishedAt = time.Now().UTC()
	rep.Seconds = round(rep.FinishedAt.Sub(rep.StartedAt).Seconds(), 1)
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	return rep, nil
}

func selectScenarios(names []string) ([]string, error) {
	if len(names) == 0 {
		return Scenarios, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		found := false
		for _, s := range Scenarios {
			if s == n {
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown scenario %q (valid: %s)", n, strings.Join(Scenarios, ", "))
		}
		want[n] = true
	}
	var out []string
	for _, s := range Scenarios {
		if want[s] {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no scenarios selected")
	}
	return out, nil
}

// finish computes the ratio and whether the target was met.
func (f *Figure) finish() {
	f.Value = round(f.Value, 3)
	if f.Baseline != nil {
		b := round(*f.Baseline, 3)
		f.Baseline = &b
		if b != 0 {
			ratio := round(f.Value/b, 3)
			f.Ratio = &ratio
		}
	}
	f.Met = f.Target.met(f)
}

func withBaseline(f Figure, baseline float64, label string) Figure {
	f.Baseline, f.BaselineLabel = &baseline, label
	return f
}

// WriteTable prints the report's figures as an aligned table.
func (rep *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "figure\tvalue\tbaseline\tratio\ttarget\tmet?\n")
	for _, f := range rep.Figures {
		base, ratio, met := "", "", ""
		if f.Baseline != nil {
			base = formatValue(*f.Baseline, f.Unit) + " (" + f.BaselineLabel + ")"
		}
		if f.Ratio != nil {
			ratio = fmt.Sprintf("%.2f", *f.Ratio)
		}
		if f.Met != nil {
			met = map[bool]string{true: "yes", false: "NO"}[*f.Met]
		}
		target := ""
		if f.Target != nil {
			target = f.Target.String()
			if f.Target.On == "value" {
				target = fmt.Sprintf("%s %s", map[string]string{"<=": "≤", ">=": "≥"}[f.Target.Op], formatValue(f.Target.Threshold, f.Unit))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", f.Label, formatValue(f.Value, f.Unit), base, ratio, target, met)
	}
	for _, s := range rep.Scenarios {
		switch {
		case s.Error != "":
			fmt.Fprintf(tw, "%s: FAILED: %s\t\t\t\t\t\n", s.Name, s.Error)
		case s.Skipped != "":
			fmt.Fprintf(tw, "%s: skipped: %s\t\t\t\t\t\n", s.Name, s.Skipped)
		}
	}
	return tw.Flush()
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func formatValue(v float64, unit string) string {
	switch unit {
	case "tasks/s", "steps/s", "claims/s":
		return fmt.Sprintf("%.0f %s", v, unit)
	case "ms":
		return fmt.Sprintf("%.1f ms", v)
	case "MB":
		return fmt.Sprintf("%.1f MB", v)
	}
	return trimFloat(v) + " " + unit
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// machineBasics fills what the Go runtime and /proc know.
func machineBasics() Machine {
	m := Machine{CPUs: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH, GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				var kb int64
				fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
				m.MemoryBytes = kb * 1024
			}
		}
	}
	return m
}
