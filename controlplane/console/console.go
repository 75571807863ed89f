package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// Prefix is the path the console is served under.
const Prefix = "/ui"

//go:embed static
var static embed.FS

// ContentSecurityPolicy allows only the console's own files and calls to
// the API of the server that served them: no inline script or style, no
// other origin, no framing (a framed console could be clickjacked into
// deleting objects with the user's token).
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// contentTypes are the types of the console's files, fixed here rather
// than read from the host's mime.types: a module script served with
// another type is refused by the browser.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

// file is one embedded file, ready to serve.
type file struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the console's files. Its zero value is not usable; use
// New.
type Handler struct {
	files map[string]file
}

// New reads the embedded files once: they never change while the binary
// runs, so each request is a map lookup and a write.
func New() *Handler {
	h := &Handler{files: map[string]file{}}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		ct, known := contentTypes[path.Ext(p)]
		if !known {
			return fmt.Errorf("%s: no content type for its extension", p)
		}
		sum := sha256.Sum256(body)
		h.files[strings.TrimPrefix(p, "static/")] = file{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		// The files are compiled in: a failure to read them is a broken
		// build, not input.
		panic("console: reading the embedded files: " + err.Error())
	}
	return h
}

// Files lists the names of the served files (for tests).
func (h *Handler) Files() []string {
	names := make([]string, 0, len(h.files))
	for n := range h.files {
		names = append(names, n)
	}
	return names
}

// Match reports whether p is a console path: /ui or under /ui/.
func Match(p string) bool {
	return p == Prefix || strings.HasPrefix(p, Prefix+"/")
}

// ServeHTTP serves /ui/ (index.html) and /ui/NAME. /ui redirects to /ui/
// so that the page's relative links resolve under /ui/.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", ContentSecurityPolicy)
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == Prefix {
		http.Redirect(w, r, Prefix+"/", http.StatusMovedPermanently)
		return
	}
	name := strings.TrimPrefix(r.URL.Path, Prefix+"/")
	if name == "" {
		name = "index.html"
	}
	f, ok := h.files[name]
	if !ok {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	// The names carry no content hash (there is no build step to add
	// one), so a browser must revalidate each file; the ETag makes that a
	// 304 without a body, and an upgraded server's new files are seen at
	// once.
	hd.Set("Cache-Control", "no-cache")
	hd.Set("ETag", f.etag)
	hd.Set("Content-Type", f.contentType)
	if match := r.Header.Get("If-None-Match"); match != "" && etagMatches(match, f.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return
	}
	_, _ = w.Write(f.body)
}

// etagMatches reports whether an If-None-Match list names etag.
func etagMatches(list, etag string) bool {
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		t = strings.TrimPrefix(t, "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}
