package web

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, path string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestIndexReferencesEmbeddedAssets checks that every /ui/ asset the page
// loads is embedded, and that the page loads nothing from elsewhere.
func TestIndexReferencesEmbeddedAssets(t *testing.T) {
	h := Handler()
	index := get(t, h, "/")
	if index.Code != http.StatusOK {
		t.Fatalf("GET /: %d", index.Code)
	}
	body := index.Body.String()
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(body, -1)
	if len(refs) < 3 {
		t.Fatalf("index.html references %d assets, want the script, the stylesheet and the icon", len(refs))
	}
	for _, m := range refs {
		ref := m[1]
		if !strings.HasPrefix(ref, "/ui/") {
			t.Errorf("index.html loads %q, not an embedded asset", ref)
			continue
		}
		if rec := get(t, h, ref); rec.Code != http.StatusOK || rec.Body.Len() == 0 {
			t.Errorf("GET %s: %d (%d bytes)", ref, rec.Code, rec.Body.Len())
		}
	}
}

// TestNoRemoteResources checks the assets fetch nothing from another
// origin at run time (no CDN): only the SVG namespace URI is allowed.
func TestNoRemoteResources(t *testing.T) {
	h := Handler()
	for _, name := range []string{"/", "/ui/app.js", "/ui/style.css", "/ui/favicon.svg"} {
		body := get(t, h, name).Body.String()
		for _, m := range regexp.MustCompile(`https?://[^\s"'<>)]+`).FindAllString(body, -1) {
			if m != "http://www.w3.org/2000/svg" {
				t.Errorf("%s refers to %s", name, m)
			}
		}
	}
}

func TestCachingAndHeaders(t *testing.T) {
	h := Handler()
	rec := get(t, h, "/ui/app.js")
	etag := rec.Header().Get("ETag")
	if rec.Code != http.StatusOK || etag == "" || rec.Header().Get("Cache-Control") != "no-cache" {
		t.Fatalf("GET /ui/app.js: %d, ETag %q, Cache-Control %q", rec.Code, etag, rec.Header().Get("Cache-Control"))
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") {
		t.Errorf("app.js Content-Type %q", ct)
	}
	if rec := get(t, h, "/ui/app.js", "If-None-Match", etag); rec.Code != http.StatusNotModified {
		t.Errorf("GET with the ETag: %d, want 304", rec.Code)
	}
	if rec := get(t, h, "/ui/nope.js"); rec.Code != http.StatusNotFound {
		t.Errorf("GET /ui/nope.js: %d, want 404", rec.Code)
	}
	if rec := get(t, h, "/ui/"); rec.Code != http.StatusNotFound {
		t.Errorf("GET /ui/: %d, want 404", rec.Code)
	}
	page := get(t, h, "/")
	if csp := page.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("page CSP %q", csp)
	}
	if page.Header().Get("X-Frame-Options") != "DENY" {
		t.Error("page may be framed")
	}
}
