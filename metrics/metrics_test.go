package metrics

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// staticStats is an in-memory queue-depth source: a fixed set of numbers,
// not a stand-in for the database.
func staticStats(stats ...QueueStat) QueueStatsFunc {
	return func(context.Context) ([]QueueStat, error) { return stats, nil }
}

// newTestMetrics builds the full set on a fresh registry and puts one
// observation on every collector, so every family appears in the exposition.
func newTestMetrics(t *testing.T, src QueueStatsSource) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := New(reg, "v1.2.3")
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	m.InitQueue("default", 8)
	m.InitTaskType("noop", "default")
	m.TasksTotal.WithLabelValues("noop", "default", OutcomeCompleted).Inc()
	m.TaskDuration.WithLabelValues("noop", "default").Observe(0.02)
	m.QueueWait.WithLabelValues("noop", "default").Observe(1.5)
	m.WorkersBusy.WithLabelValues("default").Inc()
	m.GuardResults.WithLabelValues(GuardObtained).Inc()
	m.GuardCircuitOpen.Set(1)
	m.StaleCompletions.Inc()
	if err := reg.Register(NewQueueCollector(src, time.Second, "default", "emails")); err != nil {
		t.Fatalf("register queue collector: %v", err)
	}
	return reg
}

// scrape fetches the exposition through Handler, as Prometheus would.
func scrape(t *testing.T, g prometheus.Gatherer) []byte {
	t.Helper()
	srv := httptest.NewServer(Handler(g, nil))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read /metrics: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: status %d\n%s", resp.StatusCode, body)
	}
	return body
}

// family returns the gathered family called name, or nil.
func family(mfs []*dto.MetricFamily, name string) *dto.MetricFamily {
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	return nil
}

// sample returns the value of the gauge or counter series name{labels},
// which must match the series' labels exactly.
func sample(mfs []*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	for _, m := range family(mfs, name).GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		match := true
		for _, lp := range m.GetLabel() {
			if v, ok := labels[lp.GetName()]; !ok || v != lp.GetValue() {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

func TestExpositionPassesPromtool(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not on PATH: install the Debian package prometheus (make test does)")
	}
	reg := newTestMetrics(t, staticStats(
		QueueStat{Queue: "default", State: QueueStateQueued, Count: 3, OldestAge: 90 * time.Second},
		QueueStat{Queue: "default", State: QueueStateInProgress, Count: 1, OldestAge: 2 * time.Second},
	))
	body := scrape(t, reg)

	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	// promtool exits non-zero on problems but prints lint findings too;
	// either one is a failure, since every finding is ours to fix.
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

func TestExpositionValues(t *testing.T) {
	t.Parallel()
	reg := newTestMetrics(t, staticStats(
		QueueStat{Queue: "default", State: QueueStateQueued, Count: 3, OldestAge: 90 * time.Second},
		QueueStat{Queue: "default", State: QueueStateInProgress, Count: 1, OldestAge: 2 * time.Second},
	))

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"switchyard_queue_tasks", map[string]string{"queue": "default", "state": "queued"}, 3},
		{"switchyard_queue_tasks", map[string]string{"queue": "default", "state": "in_progress"}, 1},
		{"switchyard_queue_oldest_task_age_seconds", map[string]string{"queue": "default", "state": "queued"}, 90},
		{"switchyard_queue_oldest_task_age_seconds", map[string]string{"queue": "default", "state": "in_progress"}, 2},
		// Known queues and states the source had no rows for read as zero.
		{"switchyard_queue_tasks", map[string]string{"queue": "default", "state": "retrying"}, 0},
		{"switchyard_queue_tasks", map[string]string{"queue": "emails", "state": "queued"}, 0},
		{"switchyard_queue_oldest_task_age_seconds", map[string]string{"queue": "emails", "state": "waiting"}, 0},
		{"switchyard_queue_stats_errors_total", nil, 0},
		{"switchyard_tasks_total", map[string]string{"type": "noop", "queue": "default", "outcome": "completed"}, 1},
		{"switchyard_tasks_total", map[string]string{"type": "noop", "queue": "default", "outcome": "lost"}, 0},
		{"switchyard_workers_busy", map[string]string{"queue": "default"}, 1},
		{"switchyard_workers_max", map[string]string{"queue": "default"}, 8},
		{"switchyard_guard_results_total", map[string]string{"result": "obtained"}, 1},
		{"switchyard_guard_results_total", map[string]string{"result": "unavailable"}, 0},
		{"switchyard_guard_circuit_open", nil, 1},
		{"switchyard_stale_completions_total", nil, 1},
		{"switchyard_build_info", map[string]string{"version": "v1.2.3", "go_version": runtime.Version()}, 1},
	} {
		got, ok := sample(mfs, c.name, c.labels)
		if !ok {
			t.Errorf("%s%v: no such series", c.name, c.labels)
			continue
		}
		if got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}

	// Every outcome and every guard result exists from the start, so the
	// first increment shows up in rate() instead of being its baseline;
	// every known queue has every state.
	for name, want := range map[string]int{
		"switchyard_tasks_total":                   len(Outcomes()),
		"switchyard_guard_results_total":           len(GuardResultValues()),
		"switchyard_queue_tasks":                   2 * len(QueueStates()),
		"switchyard_queue_oldest_task_age_seconds": 2 * len(QueueStates()),
	} {
		if got := len(family(mfs, name).GetMetric()); got != want {
			t.Errorf("%s has %d series, want %d", name, got, want)
		}
	}

	body := string(scrape(t, reg))
	for _, line := range []string{
		`switchyard_tasks_total{outcome="completed",queue="default",type="noop"} 1`,
		`switchyard_tasks_total{outcome="lost",queue="default",type="noop"} 0`,
		`switchyard_task_duration_seconds_bucket{queue="default",type="noop",le="0.025"} 1`,
		`switchyard_task_duration_seconds_bucket{queue="default",type="noop",le="86400"} 1`,
		`switchyard_task_queue_wait_seconds_sum{queue="default",type="noop"} 1.5`,
		"go_goroutines ",
		"process_start_time_seconds ",
	} {
		if !strings.Contains(body, line) {
			t.Errorf("exposition lacks %q", line)
		}
	}
}

func TestFailingQueueSourceKeepsScrape(t *testing.T) {
	t.Parallel()
	failing := QueueStatsFunc(func(context.Context) ([]QueueStat, error) {
		return nil, errors.New("connection refused")
	})
	reg := newTestMetrics(t, failing)

	// The registry reports the failure to whoever gathers...
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Gather error = %v, want the source's error", err)
	}

	// ...while the handler still serves everything else with 200.
	body := string(scrape(t, reg))
	for _, line := range []string{
		`switchyard_stale_completions_total 1`,
		`switchyard_workers_max{queue="default"} 8`,
		"go_goroutines ",
	} {
		if !strings.Contains(body, line) {
			t.Errorf("exposition lacks %q after a failed queue query:\n%s", line, body)
		}
	}
	if strings.Contains(body, "switchyard_queue_tasks{") {
		t.Errorf("exposition has queue depth although the query failed:\n%s", body)
	}
	// Gather once, scrape once: two failures, and the second scrape's own
	// failure is already counted in what it shows.
	if !strings.Contains(body, "switchyard_queue_stats_errors_total 2") {
		t.Errorf("exposition lacks switchyard_queue_stats_errors_total 2:\n%s", body)
	}
}

func TestQueueCollectorTimeout(t *testing.T) {
	t.Parallel()
	// release lets the blocked source finish once the test is done, so its
	// goroutine does not outlive the test.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	// The source ignores its context on purpose: the collector must stop
	// waiting at the deadline even for a source that does not.
	stuck := QueueStatsFunc(func(context.Context) ([]QueueStat, error) {
		<-release
		return nil, nil
	})
	c := NewQueueCollector(stuck, 10*time.Millisecond)

	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	_, err := reg.Gather()
	if err == nil || !strings.Contains(err.Error(), errQueueStatsTimeout.Error()) {
		t.Fatalf("Gather error = %v, want a timeout", err)
	}
	// That failed Gather is already counted; this one fails again and
	// shows both.
	mfs, _ := reg.Gather()
	if got, ok := sample(mfs, "switchyard_queue_stats_errors_total", nil); !ok || got != 2 {
		t.Errorf("switchyard_queue_stats_errors_total = %v (present %v), want 2", got, ok)
	}
}

func TestNewTwiceOnOneRegistryFails(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	if _, err := New(reg, "v1"); err != nil {
		t.Fatalf("first New: %v", err)
	}
	before, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}

	_, err = New(reg, "v1")
	var already prometheus.AlreadyRegisteredError
	if !errors.As(err, &already) {
		t.Fatalf("second New error = %v, want an AlreadyRegisteredError", err)
	}

	// The failed call must leave the first set registered and working.
	after, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather after failed New: %v", err)
	}
	if len(after) != len(before) {
		t.Errorf("families after failed New = %d, want %d", len(after), len(before))
	}
}

func TestNewRollsBackOnConflict(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	// Something else already owns a name New needs, part-way through its list.
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "switchyard_guard_circuit_open", Help: "squatter"}))

	if _, err := New(reg, "v1"); err == nil {
		t.Fatal("New succeeded despite a conflicting collector")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	if len(mfs) != 1 || mfs[0].GetName() != "switchyard_guard_circuit_open" {
		var names []string
		for _, mf := range mfs {
			names = append(names, mf.GetName())
		}
		t.Errorf("families after failed New = %v, want only the squatter", names)
	}
	// And a retry on a clean registry is unaffected by the failed attempt.
	if _, err := New(prometheus.NewRegistry(), "v1"); err != nil {
		t.Errorf("New on a fresh registry: %v", err)
	}
}

func TestNewRejectsNilRegisterer(t *testing.T) {
	t.Parallel()
	if _, err := New(nil, "v1"); err == nil {
		t.Fatal("New(nil) succeeded")
	}
}
