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
