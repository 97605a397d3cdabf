package api

import (
	"net/http"
	"strings"
	"testing"
)

func TestWhoami(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, tc := range []struct{ token, name, scope string }{
		{readToken, "reader", "read"},
		{writeToken, "writer", "write"},
		{adminToken, "admin", "admin"},
	} {
		res, data := b.do(t, "GET", "/v1/whoami", tc.token, "")
		if res.StatusCode != http.StatusOK {
			t.Fatalf("whoami as %s: %d %s", tc.name, res.StatusCode, data)
		}
		got := decode[whoamiResponse](t, data)
		if got.Name != tc.name || got.Scope != tc.scope {
			t.Errorf("whoami as %s = %+v, want %s/%s", tc.name, got, tc.name, tc.scope)
		}
		if strings.Contains(string(data), tc.token) {
			t.Errorf("whoami answer carries the secret: %s", data)
		}
	}
	res, data := b.do(t, "GET", "/v1/whoami", "", "")
	expectProblem(t, res, data, http.StatusUnauthorized, "unauthorized")
}

// TestDashboardRoutes checks that the dashboard is served next to the API
// without a token, with its security headers, and that everything else
// still answers as the API does.
func TestDashboardRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})

	res, data := b.do(t, "GET", "/", "", "")
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if !strings.Contains(string(data), `src="/ui/app.js"`) {
		t.Errorf("GET / does not load the app: %s", data)
	}
	csp := res.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Errorf("GET /: Content-Security-Policy %q", csp)
	}
	etag := res.Header.Get("ETag")
	if etag == "" {
		t.Fatal("GET /: no ETag")
	}
	if res, _ := b.do(t, "GET", "/", "", "", "If-None-Match", etag); res.StatusCode != http.StatusNotModified {
		t.Errorf("GET / with its ETag: %d, want 304", res.StatusCode)
	}

	for path, ct := range map[string]string{"/ui/app.js": "text/javascript", "/ui/style.css": "text/css", "/ui/favicon.svg": "image/svg+xml"} {
		res, data := b.do(t, "GET", path, "", "")
		if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), ct) || len(data) == 0 {
			t.Errorf("GET %s: %d %q (%d bytes)", path, res.StatusCode, res.Header.Get("Content-Type"), len(data))
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", path)
		}
	}
	if res, _ := b.do(t, "GET", "/ui/missing.js", "", ""); res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /ui/missing.js: %d", res.StatusCode)
	}
	if res, _ := b.do(t, "GET", "/ui/../openapi.yaml", "", ""); res.StatusCode == http.StatusOK && strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET /ui/../openapi.yaml served the page")
	}
	// The page is GET only; unknown paths and /v1 stay problem+json.
	res, data = b.do(t, "POST", "/", "", "{}")
	if res.StatusCode < 400 {
		t.Errorf("POST /: %d", res.StatusCode)
	}
	res, data = b.do(t, "GET", "/v1/nope", readToken, "")
	expectProblem(t, res, data, http.StatusNotFound, "not-found")
	res, data = b.do(t, "GET", "/index.html", "", "")
	expectProblem(t, res, data, http.StatusNotFound, "not-found")
}

func TestDashboardNotOnOpsOnlyPods(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: Config{OpsOnly: true}})
	res, data := b.do(t, "GET", "/", "", "")
	expectProblem(t, res, data, http.StatusNotFound, "not-found")
	res, data = b.do(t, "GET", "/ui/app.js", "", "")
	expectProblem(t, res, data, http.StatusNotFound, "not-found")
}
