package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/bench"
	"github.com/switchyard/switchyard/dbtest"
)

// TestBenchTiny runs switchyard bench in its smallest configuration
// against the local Postgres and Redis, so the command keeps working. It
// checks the report's structure, never its speed.
func TestBenchTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every benchmark scenario (tens of seconds)")
	}
	dir := t.TempDir()
	// The memory scenario starts a worker process: this package built as
	// the switchyard binary.
	bin := filepath.Join(dir, "switchyard")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build switchyard: %v\n%s", err, out)
	}
	dbURL := os.Getenv(dbtest.DatabaseURLEnv)
	if dbURL == "" {
		dbURL = "postgres://postgres@127.0.0.1:55432/switchyard?sslmode=disable"
	}
	env := map[string]string{"SWITCHYARD_DATABASE_URL": dbURL, "SWITCHYARD_REDIS_URL": testRedisURL()}
	report := filepath.Join(dir, "report.json")
	var stdout, stderr syncBuffer
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	err := run(ctx, []string{"switchyard", "bench", "--tiny", "--json", report, "--binary", bin},
		func(k string) string { return env[k] }, &stdout, &stderr)
	if err != nil {
		t.Fatalf("bench: %v\nstderr:\n%s", err, stderr.String())
	}

	var rep bench.Report
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("decode report: %v\n%s", err, b)
	}
	if rep.Schema != bench.ReportSchema || rep.Mode != bench.ModeTiny || rep.Machine.CPUs < 1 || rep.Machine.PostgresVersion == "" {
		t.Errorf("report header: schema %q mode %q machine %+v", rep.Schema, rep.Mode, rep.Machine)
	}
	var names []string
	for _, s := range rep.Scenarios {
		names = append(names, s.Name)
		if s.Error != "" || s.Skipped != "" {
			t.Errorf("scenario %s: error %q, skipped %q", s.Name, s.Error, s.Skipped)
		}
	}
	if got, want := strings.Join(names, ","), strings.Join(bench.Scenarios, ","); got != want {
		t.Errorf("scenarios %s, want %s", got, want)
	}
	want := []string{
		"throughput.raw_river", "throughput.raw_river_switchyard_schema", "throughput.guard_off", "throughput.full_pipeline",
		"throughput.raw_river.cpu_us_per_task", "throughput.raw_river_switchyard_schema.cpu_us_per_task",
		"throughput.guard_off.cpu_us_per_task", "throughput.full_pipeline.cpu_us_per_task",
		"latency.200_per_s.sent_per_s", "latency.200_per_s.p50", "latency.200_per_s.p95", "latency.200_per_s.p99",
		"workflow.fan_out.steps_per_s", "workflow.fan_out.dependent_start_p50", "workflow.fan_out.dependent_start_p99",
		"workflow.chains.steps_per_s", "workflow.chains.dependent_start_p50", "workflow.chains.dependent_start_p99",
		"memory.rss_peak_mb", "memory.heap_busy_mb", "memory.goroutines_busy",
		"scale.claims_per_s_backlog",
	}
	figs := map[string]bench.Figure{}
	for _, f := range rep.Figures {
		figs[f.ID] = f
	}
	for _, id := range want {
		f, ok := figs[id]
		switch {
		case !ok:
			t.Errorf("figure %s missing", id)
			continue
		case f.Value <= 0 || f.Unit == "" || f.Label == "":
			t.Errorf("figure %s: %+v", id, f)
		case f.Baseline != nil && (f.Ratio == nil || f.BaselineLabel == ""):
			t.Errorf("figure %s has a baseline but no ratio or label: %+v", id, f)
		case f.Target != nil && f.Met == nil:
			t.Errorf("figure %s has a target but no verdict: %+v", id, f)
		}
	}
	if len(figs) != len(want) {
		t.Errorf("%d figures, want %d", len(figs), len(want))
	}
	if f := figs["throughput.full_pipeline"]; f.Baseline == nil || f.Target == nil {
		t.Errorf("full pipeline throughput without baseline or target: %+v", f)
	}
	if !strings.Contains(stdout.String(), "figure") || !strings.Contains(stdout.String(), "no-op tasks/s, raw River") {
		t.Errorf("no table on stdout:\n%s", stdout.String())
	}

	// Every database of the run is gone.
	m := regexp.MustCompile(`switchyard_bench_[0-9a-f]+`).FindString(stderr.String())
	if m == "" {
		t.Fatalf("no database name in the progress output:\n%s", stderr.String())
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var left int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname LIKE $1`, m+"%").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d databases %s* left behind", left, m)
	}
}

func TestBenchFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--quick", "--tiny"},
		{"--scenarios", "throughput,nonsense"},
		{"extra"},
	} {
		var stdout, stderr bytes.Buffer
		getenv := func(string) string { return "" }
		if err := run(t.Context(), append([]string{"switchyard", "bench"}, args...), getenv, &stdout, &stderr); err == nil {
			t.Errorf("bench %v: no error", args)
		}
	}
}
