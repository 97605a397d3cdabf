package bench

import (
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]float64{50: 50, 95: 95, 99: 99, 100: 100} {
		if got := percentile(d, p); got != want {
			t.Errorf("p%.0f = %v, want %v", p, got, want)
		}
	}
	if got := percentile(nil, 50); got != 0 {
		t.Errorf("p50 of nothing = %v", got)
	}
}

func TestFigureFinish(t *testing.T) {
	f := withBaseline(Figure{Value: 8000, Target: atLeast("ratio", 0.8)}, 10000, "raw River")
	f.finish()
	if f.Ratio == nil || *f.Ratio != 0.8 || f.Met == nil || !*f.Met {
		t.Errorf("ratio %v met %v", f.Ratio, f.Met)
	}
	g := Figure{Value: 6, Unit: "ms", Target: atMost("value", 5)}
	g.finish()
	if g.Ratio != nil || g.Met == nil || *g.Met {
		t.Errorf("ratio %v met %v", g.Ratio, g.Met)
	}
	var b strings.Builder
	rep := &Report{Figures: []Figure{f, g}, Scenarios: []ScenarioResult{{Name: "scale", Error: "boom"}}}
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ratio ≥ 0.8", "≤ 5.0 ms", "NO", "yes", "scale: FAILED: boom"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestSelectScenarios(t *testing.T) {
	got, err := selectScenarios([]string{"scale", " throughput", ""})
	if err != nil || strings.Join(got, ",") != "throughput,scale" {
		t.Errorf("got %v, %v", got, err)
	}
	if _, err := selectScenarios([]string{"nope"}); err == nil {
		t.Error("unknown scenario accepted")
	}
}
