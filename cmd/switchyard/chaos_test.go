package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/switchyard/switchyard/chaos"
	"github.com/switchyard/switchyard/db"
	"github.com/switchyard/switchyard/dbtest"
	"github.com/switchyard/switchyard/jobs"
)

// switchyard chaos checks its flags before it starts anything (the run
// itself is make chaos-short, in .ci/run).
func TestChaosRejectsBadInvocations(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"chaos", "--pods", "0", "--dir", dir}, "--pods"},
		{[]string{"chaos", "--dir", dir, "now"}, "no arguments"},
		{[]string{"chaos", "--dir", dir, "--schedule", "sometimes", "--services-script", "/nonexistent"}, "unknown schedule"},
	} {
		if got := runErr(t, nil, c.args...); !strings.Contains(got, c.want) {
			t.Errorf("switchyard %s: %q, want it to mention %q", strings.Join(c.args, " "), got, c.want)
		}
	}
	_, stderr, err := runCmd(t.Context(), nil, "chaos", "-h")
	if err != nil || !strings.Contains(stderr, "-kill-every") {
		t.Errorf("chaos -h: %v, stderr %q", err, stderr)
	}
}

// serve --chaos-handlers runs chaos.work and records the runs under the
// pod id given by --pod-id, which is also the pod's registered id.
func TestServeChaosHandlersWithPodID(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	pool, err := db.NewPool(t.Context(), db.PoolConfig{URL: dbURL, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := chaos.CreateTables(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	startServe(t, testEnv(t, dbURL), "--chaos-handlers", "--pod-id", "chaos-test-pod")

	reg := jobs.NewRegistry()
	if err := chaos.RegisterTypes(reg); err != nil {
		t.Fatal(err)
	}
	client, err := jobs.NewInsertOnlyClient(pool, reg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Enqueue(t.Context(), chaos.WorkArgs{SleepMS: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitTaskState(t, client, res.Task.ID, jobs.StateCompleted)
	var pod, outcome string
	if err := pool.QueryRow(t.Context(), `SELECT pod, outcome FROM chaos_ledger WHERE task_id = $1`, res.Task.ID).Scan(&pod, &outcome); err != nil {
		t.Fatal(err)
	}
	if pod != "chaos-test-pod" || outcome != "done" {
		t.Errorf("ledger: pod %q outcome %q, want chaos-test-pod done", pod, outcome)
	}
	waitFor(t, "the pod registered as chaos-test-pod", func() (bool, string) {
		var n int
		err := pool.QueryRow(t.Context(), `SELECT count(*) FROM switchyard_pod WHERE id = 'chaos-test-pod'`).Scan(&n)
		return err == nil && n == 1, fmt.Sprint(n, err)
	})
}
