package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzTaskCreate throws arbitrary bodies at the enqueue endpoints through
// the real router and a real database: whatever the input, the answer is a
// 2xx or a 4xx problem, never a 5xx or a panic. The seed corpus runs in
// every `go test`; `go test -fuzz FuzzTaskCreate ./api/` explores further.
func FuzzTaskCreate(f *testing.F) {
	for _, seed := range []string{
		`{"type":"noop"}`,
		`{"type":"sleep","args":{"duration":"1ms"},"queue":"q","priority":4,"delay":"1s","max_attempts":2,"timeout":"1m","tags":["abc"],"idempotency_key":"k"}`,
		`{"type":"http.request","args":{"url":"http://127.0.0.1:1/x","method":"POST","headers":{"A":"b"},"retry_on":["404"]}}`,
		`{"type":"sleep","args":{"duration":-1}}`,
		`{"type":"noop","run_at":"2026-01-01T00:00:00Z"}`,
		`{"type":"noop","run_at":"not a time"}`,
		`{"type":"noop","priority":1e400}`,
		`{"type":"noop","tags":[null]}`,
		`{"type":"noop","args":null}`,
		`{"type":"noop","args":"str"}`,
		`{"type":"\u0000"}`,
		`{"tasks":[{"type":"noop"},{"type":"sleep","args":{}}]}`,
		`{"tasks":null}`,
		`{"type":"noop","delay":"9999999999h"}`,
		`{"type":"noop","idempotency_key":"a\u0000b"}`,
		`{"tasks":[{"type":"noop","tags":["a\u0000b"],"colour":1,"priority":"x"}]}`,
		`{"type":"noop","timeout":"-5s"}`,
		`{"type":"noop","queue":"` + strings.Repeat("q", 300) + `"}`,
		`[]`, `null`, `""`, `{`, `{"type":{}}`, `{"type":"noop"}{"type":"noop"}`,
	} {
		f.Add(false, seed)
		f.Add(true, seed)
	}
	b := setup(f, setupOpts{})
	f.Fuzz(func(t *testing.T, batch bool, body string) {
		path := "/v1/tasks"
		if batch {
			path = "/v1/tasks/batch"
		}
		res, data := b.do(t, "POST", path, writeToken, body)
		switch {
		case res.StatusCode >= 500:
			t.Fatalf("%s %q: %d %s", path, body, res.StatusCode, data)
		case res.StatusCode >= 400:
			var p Problem
			if err := json.Unmarshal(data, &p); err != nil || p.Status != res.StatusCode || p.Type == "" {
				t.Fatalf("%s %q: %d with a body that is not a problem: %s", path, body, res.StatusCode, data)
			}
		case res.StatusCode != 200 && res.StatusCode != 202:
			t.Fatalf("%s %q: unexpected status %d", path, body, res.StatusCode)
		}
	})
}

// FuzzWorkflowStart throws arbitrary bodies at POST /v1/workflows and, with
// signal set, at the signal endpoint of a running execution, through the
// real router and a real database: whatever the input, the answer is a 2xx
// or a 4xx problem, never a 5xx or a panic. The seed corpus runs in every
// `go test`; `go test -fuzz FuzzWorkflowStart ./api/` explores further.
func FuzzWorkflowStart(f *testing.F) {
	for _, seed := range []string{
		`{"name":"w","steps":[{"key":"a","task":{"type":"noop"}}]}`,
		`{"name":"full","input":{"k":[1,{"x":null}]},"timeout":"1h","idempotency_key":"idem","steps":[
			{"key":"a","task":{"type":"sleep","args":{"duration":"1ms"},"queue":"q","priority":4,"timeout":"1m","retry":{"max_attempts":2,"initial_backoff":"1s","multiplier":2,"max_backoff":"1m","jitter":0.5}}},
			{"key":"b","depends_on":["a"],"optional":true,"delay":{"duration":"1s"}},
			{"key":"c","depends_on":["a"],"delay":{"until":"2026-12-01T00:00:00Z"}},
			{"key":"d","depends_on":["b","c"],"wait":{"signal":"go","timeout":"5m"}},
			{"key":"e","depends_on":["d"],"workflow":{"name":"child","steps":[{"key":"x","task":{"type":"noop"}}]}}]}`,
		`{"name":"deep","steps":[{"key":"a","workflow":{"name":"1","steps":[{"key":"a","workflow":{"name":"2","steps":[{"key":"a","workflow":{"name":"3","steps":[{"key":"a","workflow":{"name":"4","steps":[{"key":"a","workflow":{"name":"5","steps":[{"key":"a","workflow":{"name":"6","steps":[{"key":"a","task":{"type":"noop"}}]}}]}}]}}]}}]}}]}}]}`,
		`{"name":"cycle","steps":[{"key":"a","depends_on":["b"],"task":{"type":"noop"}},{"key":"b","depends_on":["a"],"task":{"type":"noop"}}]}`,
		`{"name":"self","steps":[{"key":"a","depends_on":["a"],"task":{"type":"noop"}}]}`,
		`{"name":"x","steps":[{"key":"a","task":{"type":"noop","queue":"Bad Name"}}]}`,
		`{"name":"x","steps":[{"key":"a","task":{"type":"noop","queue":"` + strings.Repeat("q", 300) + `"}}]}`,
		`{"name":"x","steps":[{"key":"a","task":{"type":"noop","priority":1e400}}]}`,
		`{"name":"x","steps":[{"key":"a","task":{"type":"noop","priority":-1,"timeout":"-1s","retry":{"max_attempts":-1,"multiplier":0.5,"jitter":2,"initial_backoff":"-1s"}}}]}`,
		`{"name":"x","timeout":"9999999999h","steps":[{"key":"a","delay":{"duration":"9999h"}}]}`,
		`{"name":"x","steps":[{"key":"a","delay":{"duration":"1s","until":"2026-01-01T00:00:00Z"}}]}`,
		`{"name":"x","steps":[{"key":"a","delay":{"until":"1999-01-01T00:00:00Z"}}]}`,
		`{"name":"x","steps":[{"key":"a","delay":{"until":"9999-12-31T23:59:59Z"}}]}`,
		`{"name":"x","steps":[{"key":"a","delay":{"until":"soon"}}]}`,
		`{"name":"x","steps":[{"key":"a","wait":{"signal":"bad name"}}]}`,
		`{"name":"x","steps":[{"key":"a","task":{"type":"noop"},"wait":{"signal":"s"}}]}`,
		`{"name":"x","steps":[{"key":"","task":{"type":"noop"}},{"key":"a b","task":{"type":"noop"}}]}`,
		`{"name":"x","steps":[{"key":"a","task":{"type":"switchyard.workflow"}}]}`,
		`{"name":"x","steps":[{"key":"a","task":{"type":"http.request","args":{"url":"http://127.0.0.1:1/\u0000"}}}]}`,
		`{"name":"\u0000","idempotency_key":"\u0000","input":{"\u0000":"\u0000"},"steps":[{"key":"a","task":{"type":"noop"}}]}`,
		`{"name":"x","input":[],"steps":[{"key":"a","task":{"type":"noop"}}]}`,
		`{"name":"x","input":null,"steps":[null]}`,
		`{"name":"x","steps":[{"key":"a","task":null,"delay":null,"wait":null,"workflow":null}]}`,
		`{"name":"x","steps":{}}`, `{"name":1,"steps":"s"}`, `{"Name":"x","STEPS":[{"KEY":"a","Task":{"Type":"noop"}}]}`,
		`{"name":"x","steps":[{"key":"a","task":{"type":"noop","args":{"x":1}}}]}`,
		`{"name":"x","steps":[{"key":"a","workflow":{"name":"c","idempotency_key":"k","steps":[]}}]}`,
		`{"name":"` + strings.Repeat("n", 300) + `","steps":[]}`,
		`[]`, `null`, `""`, `{`, `{"name":"x"}{"name":"y"}`, `{"steps":[{"key":"a","task":{"type":"noop"}}],"steps":7}`,
	} {
		f.Add(false, seed)
	}
	for _, seed := range []string{
		``, `{}`, `null`, `{"payload":{"by":"alice"},"idempotency_key":"k"}`, `{"payload":null}`, `{"payload":"\u0000"}`,
		`{"idempotency_key":"` + strings.Repeat("k", 300) + `"}`, `{"idempotency_key":"\u0000"}`, `{"payload":1,"x":2}`,
		`{"payload":`, `[]`, `{"payload":1}{"payload":2}`, `{"idempotency_key":7}`,
	} {
		f.Add(true, seed)
	}
	b := setup(f, setupOpts{})
	res, data := b.do(f, "POST", "/v1/workflows", writeToken, `{"name":"fuzz","steps":[{"key":"a","wait":{"signal":"never"}}]}`)
	if res.StatusCode != 202 {
		f.Fatalf("start the signal target: %d %s", res.StatusCode, data)
	}
	var target struct{ ID int64 }
	if err := json.Unmarshal(data, &target); err != nil {
		f.Fatal(err)
	}
	signalPath := "/v1/executions/" + itoa(target.ID) + "/signals/go"
	f.Fuzz(func(t *testing.T, signal bool, body string) {
		path := "/v1/workflows"
		if signal {
			path = signalPath
		}
		res, data := b.do(t, "POST", path, writeToken, body)
		switch {
		case res.StatusCode >= 500:
			t.Fatalf("%s %q: %d %s", path, body, res.StatusCode, data)
		case res.StatusCode >= 400:
			var p Problem
			if err := json.Unmarshal(data, &p); err != nil || p.Status != res.StatusCode || p.Type == "" {
				t.Fatalf("%s %q: %d with a body that is not a problem: %s", path, body, res.StatusCode, data)
			}
		case res.StatusCode != 200 && res.StatusCode != 202:
			t.Fatalf("%s %q: unexpected status %d", path, body, res.StatusCode)
		}
	})
}
