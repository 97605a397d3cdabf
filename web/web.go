// Package web is Switchyard's dashboard: one HTML page, one JavaScript
// module and one stylesheet, written by hand (no build step, no
// dependencies, nothing fetched at run time) and embedded in the binary.
// The API server serves it at / and /ui/ (see api/routes.go); the page
// signs in with an API token and talks to /v1 like any other client.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// asset is one embedded file, ready to serve.
type asset struct {
	name        string
	data        []byte
	etag        string
	contentType string
}

// contentTypes covers the assets' extensions without relying on the
// machine's MIME database.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
}

// load reads every embedded file. Names are relative to static/.
func load() map[string]*asset {
	assets := map[string]*asset{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		name := strings.TrimPrefix(p, "static/")
		ct, ok := contentTypes[path.Ext(name)]
		if !ok {
			ct = mime.TypeByExtension(path.Ext(name))
		}
		assets[name] = &asset{name: name, data: data, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, contentType: ct}
		return nil
	})
	if err != nil {
		panic("web: embedded assets: " + err.Error()) // the embed is part of the binary
	}
	return assets
}

// csp allows nothing but this origin: the page loads its own script and
// stylesheet and talks to its own API.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Handler serves the dashboard: index.html at /, the other assets at
// /ui/<name>. Responses carry an ETag and Cache-Control: no-cache, so a
// browser revalidates (a 304 when nothing changed) and a new binary's
// assets are picked up at once.
func Handler() http.Handler {
	assets := load()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a *asset
		switch {
		case r.URL.Path == "/":
			a = assets["index.html"]
		case strings.HasPrefix(r.URL.Path, "/ui/"):
			a = assets[strings.TrimPrefix(r.URL.Path, "/ui/")]
		}
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if a == nil {
			http.Error(w, "404 page not found", http.StatusNotFound)
			return
		}
		h.Set("Content-Type", a.contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		if strings.HasPrefix(a.contentType, "text/html") {
			h.Set("Content-Security-Policy", csp)
			h.Set("X-Frame-Options", "DENY")
		}
		http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(a.data))
	})
}
