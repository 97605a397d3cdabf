package chaos_test

import (
	"slices"
	"testing"
	"time"

	"github.com/switchyard/switchyard/chaos"
)

// The fixed schedule of make chaos-short: every kind at least once, faults
// apart, all within the run.
func TestFixedScheduleShortRun(t *testing.T) {
	periods := chaos.Periods{Kill: 20 * time.Second, RedisRestart: 30 * time.Second, PGRestart: 40 * time.Second}
	for _, d := range []time.Duration{90 * time.Second, 45 * time.Second} {
		plan, err := chaos.Schedule(chaos.ScheduleFixed, d, periods, 1)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for i, f := range plan {
			seen[f.Kind]++
			if f.At <= 0 || f.At >= d {
				t.Errorf("%s run: fault %d (%s) at %s, outside the run", d, i, f.Kind, f.At)
			}
			if i > 0 && f.At-plan[i-1].At < 4*time.Second {
				t.Errorf("%s run: faults %d and %d only %s apart", d, i-1, i, f.At-plan[i-1].At)
			}
		}
		for _, k := range []string{chaos.FaultKill, chaos.FaultRedisRestart, chaos.FaultPGRestart} {
			if seen[k] == 0 {
				t.Errorf("%s run: no %s fault in %v", d, k, plan)
			}
		}
		again, _ := chaos.Schedule(chaos.ScheduleFixed, d, periods, 99)
		if !slices.Equal(plan, again) {
			t.Errorf("%s run: the fixed schedule depends on the seed", d)
		}
	}
	// A kind whose period exceeds the run does not fire; zero disables one.
	plan, err := chaos.Schedule(chaos.ScheduleFixed, 30*time.Second, chaos.Periods{Kill: 10 * time.Second, PGRestart: time.Minute}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range plan {
		if f.Kind != chaos.FaultKill {
			t.Errorf("unexpected %s fault in %v", f.Kind, plan)
		}
	}
}

func TestRandomScheduleIsSeeded(t *testing.T) {
	periods := chaos.Periods{Kill: 20 * time.Second, RedisRestart: 45 * time.Second, PGRestart: 90 * time.Second}
	a, err := chaos.Schedule(chaos.ScheduleRandom, 10*time.Minute, periods, 42)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := chaos.Schedule(chaos.ScheduleRandom, 10*time.Minute, periods, 42)
	c, _ := chaos.Schedule(chaos.ScheduleRandom, 10*time.Minute, periods, 43)
	if !slices.Equal(a, b) || slices.Equal(a, c) {
		t.Error("the random schedule is not a function of the seed")
	}
	counts := map[string]int{}
	for i, f := range a {
		counts[f.Kind]++
		if i > 0 && f.At < a[i-1].At {
			t.Error("schedule not sorted")
		}
		if f.At > 10*time.Minute-5*time.Second {
			t.Errorf("fault at %s, in the quiet end", f.At)
		}
	}
	// Means of 20s, 45s, 90s over 10 minutes: about 30, 13 and 6.
	if counts[chaos.FaultKill] < 20 || counts[chaos.FaultRedisRestart] < 8 || counts[chaos.FaultPGRestart] < 3 {
		t.Errorf("fault counts %v", counts)
	}
	if _, err := chaos.Schedule("sometimes", time.Minute, periods, 1); err == nil {
		t.Error("unknown schedule accepted")
	}
}
