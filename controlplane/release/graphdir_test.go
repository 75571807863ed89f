package release

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/testing/syncbuf"
)

// A site's own update service (UPD-2): payloads in releases/, channels
// and blocked edges as Cincinnati's graph-data has them, served at
// Cincinnati's path: each release's previous versions in the channel
// are its edges, a blocked edge with rules becomes a conditional edge
// and one without is removed, the payloads are downloadable, and what
// is served parses as a graph.
func TestGraphDir(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"releases", "channels", "blocked-edges"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	build := func(version string, previous ...string) {
		in := testInput(t)
		in.Metadata = Metadata{Version: version, Previous: previous}
		layout := filepath.Join(t.TempDir(), "l")
		if _, err := Build(layout, in); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dir, "releases", "outpost-"+version+".tar"))
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteTar(f, layout); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	build("1.1.0")
	build("1.2.0", "1.1.0")
	build("1.3.0", "1.1.0", "1.2.0")
	build("1.4.0", "1.3.0")
	write := func(p, s string) {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("channels/stable-1.yaml", "name: stable-1\nversions: [1.1.0, 1.2.0, 1.3.0]\n")
	write("channels/fast-1.yaml", "name: fast-1\nversions: [1.1.0, 1.2.0, 1.3.0, 1.4.0]\n")
	write("blocked-edges/1.3.0-gpu.yaml", "to: 1.3.0\nfrom: 1\\.2\\..*\nurl: https://example.com/gpu\nname: GPUDriverReload\nmessage: GPU nodes lose their driver.\nmatchingRules:\n- type: Expression\n  expression:\n    expression: nodes(\"gpu=true\") > 0\n")
	write("blocked-edges/1.3.0-from-1.1.yaml", "to: 1.3.0\nfrom: 1\\.1\\.0\nurl: https://example.com/skip\nname: TooFar\nmessage: Update through 1.2.0.\n")

	srv := httptest.NewServer(nil)
	defer srv.Close()
	gd := &GraphDir{Dir: dir, BaseURL: srv.URL}
	srv.Config.Handler = gd
	get := func(path string) (int, []byte) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, body := get(GraphPath + "?channel=stable-1&arch=amd64")
	if code != 200 {
		t.Fatalf("graph: %d %s", code, body)
	}
	g, err := ParseGraph(body)
	if err != nil {
		t.Fatal(err)
	}
	var versions []string
	for _, n := range g.Nodes {
		versions = append(versions, n.Version)
	}
	if strings.Join(versions, " ") != "1.1.0 1.2.0 1.3.0" {
		t.Errorf("stable-1 nodes %v", versions)
	}
	var edges []string
	for _, e := range g.Edges {
		edges = append(edges, g.Nodes[e[0]].Version+"→"+g.Nodes[e[1]].Version)
	}
	if strings.Join(edges, " ") != "1.1.0→1.2.0" {
		t.Errorf("edges %v, want only 1.1.0→1.2.0 (1.1→1.3 blocked, 1.2→1.3 conditional)", edges)
	}
	if len(g.ConditionalEdges) != 1 || g.ConditionalEdges[0].Edges[0].From != "1.2.0" || g.ConditionalEdges[0].Risks[0].Name != "GPUDriverReload" {
		t.Errorf("conditional edges %+v", g.ConditionalEdges)
	}
	avail, cond, err := g.Updates("1.2.0", Facts{Version: "1.2.0", NodeLabels: []map[string]string{{"gpu": "true"}}})
	if err != nil || len(avail) != 0 || len(cond) != 1 || cond[0].Recommended {
		t.Errorf("from 1.2.0 with a GPU node: %v %+v %v", avail, cond, err)
	}
	// The payload a node names is served, and is the release.
	loc, dig := SplitRef(g.Nodes[2].Payload)
	if dig != g.Nodes[2].Metadata[DigestKey] {
		t.Errorf("payload %s is not pinned by its digest %s", g.Nodes[2].Payload, g.Nodes[2].Metadata[DigestKey])
	}
	code, tarball := get(strings.TrimPrefix(loc, srv.URL))
	if code != 200 {
		t.Fatalf("payload: %d", code)
	}
	p := filepath.Join(t.TempDir(), "p.tar")
	if err := os.WriteFile(p, tarball, 0o644); err != nil {
		t.Fatal(err)
	}
	if pl, err := Open(p); err != nil || pl.Metadata.Version != "1.3.0" || pl.Digest != g.Nodes[2].Metadata[DigestKey] {
		t.Errorf("downloaded payload: %v %v", pl, err)
	}

	if code, body := get(GraphPath + "?channel=fast-1"); code != 200 || !strings.Contains(string(body), `"1.4.0"`) {
		t.Errorf("fast-1: %d %s", code, body)
	}
	if code, body := get(GraphPath + "?channel=stable-1&arch=arm64"); code != 200 || strings.Contains(string(body), `"1.1.0"`) {
		t.Errorf("arm64 (no release has it): %d %s", code, body)
	}
	var e map[string]string
	code, body = get(GraphPath + "?channel=nightly")
	if json.Unmarshal(body, &e); code != 404 || e["kind"] != "unknown_channel" || !strings.Contains(e["value"], "fast-1") {
		t.Errorf("unknown channel: %d %s", code, body)
	}
	if code, _ := get(GraphPath); code != 400 {
		t.Errorf("no channel: %d", code)
	}
	if code, _ := get("/releases/../channels/stable-1.yaml"); code != 404 {
		t.Errorf("a path out of releases/: %d", code)
	}
	// What cannot be used is left out and logged once; the rest is
	// served: a stray file, a tar that is no payload, a channel file that
	// does not parse, a blocked edge without its target.
	var logs syncbuf.Buffer
	gd.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	write("releases/README.md", "notes")
	write("releases/junk.tar", "not a tar")
	write("channels/broken-yaml.yaml", "name: [\n")
	write("blocked-edges/no-to.yaml", "from: 1\\.1\\.0\nname: X\n")
	for range 2 {
		if code, body := get(GraphPath + "?channel=stable-1"); code != 200 || !strings.Contains(string(body), `"1.3.0"`) {
			t.Errorf("stable-1 beside stray files: %d %s", code, body)
		}
	}
	for _, f := range []string{"README.md", "junk.tar", "broken-yaml.yaml", "no-to.yaml"} {
		if n := strings.Count(logs.String(), f); n != 1 {
			t.Errorf("%s logged %d times, want once:\n%s", f, n, logs.String())
		}
	}
	// The payload as the graph names it, pinned, downloads too.
	if code, _ := get(strings.TrimPrefix(g.Nodes[2].Payload, srv.URL)); code != 200 {
		t.Errorf("GET of the pinned payload reference: %d", code)
	}

	// A channel naming a version no payload has is an error, not a
	// graph with a hole.
	write("channels/broken.yaml", "name: broken\nversions: [1.1.0, 2.0.0]\n")
	if code, body := get(GraphPath + "?channel=broken"); code != 500 || !strings.Contains(string(body), "2.0.0") {
		t.Errorf("broken channel: %d %s", code, body)
	}
}
