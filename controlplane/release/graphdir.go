package release

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"
)

// GraphDir serves an update graph from a directory, as Cincinnati's
// graph-data does, so that a site hosts its own update service:
//
//	DIR/releases/          payloads (tar files)
//	DIR/channels/*.yaml    name: stable-1, versions: [1.2.0, 1.3.0]
//	DIR/blocked-edges/*.yaml
//	                       to: 1.3.0, from: <regexp of versions>, and
//	                       url, name, message, matchingRules of a risk;
//	                       without matchingRules the update is removed,
//	                       with them it becomes a conditional edge
//
// A channel's graph has its versions as nodes (those with a binary for
// the asked architecture) and an edge from each version a release names
// as previous to it. The directory is read again when it changes;
// payloads are opened (every digest checked) once per file version. A
// file that cannot be used (not a payload, a second payload of one
// version, a channel or blocked edge that does not parse) is left out
// and logged once, and the rest is served.
type GraphDir struct {
	Dir string
	// BaseURL is where clients reach this service: a node's payload is
	// BaseURL/releases/<file>@sha256:<digest>.
	BaseURL string
	// Logger gets what is left out; nil discards it.
	Logger *slog.Logger

	mu    sync.Mutex
	cache map[string]cachedPayload

	wmu    sync.Mutex
	warned map[string]bool
}

// warn logs a problem with a file once per version of the file.
func (d *GraphDir) warn(path string, err error) {
	key := path
	if st, serr := os.Stat(path); serr == nil {
		key += " " + st.ModTime().String()
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if d.warned == nil {
		d.warned = map[string]bool{}
	}
	if d.warned[key] || d.Logger == nil {
		return
	}
	d.warned[key] = true
	d.Logger.Warn("left out of the update graph", "file", path, "error", err)
}

type cachedPayload struct {
	mod  time.Time
	size int64
	meta Metadata
	dig  string
	arch []string
	err  error
}

type channelFile struct {
	Name     string   `json:"name"`
	Versions []string `json:"versions"`
}

type blockedEdge struct {
	To            string         `json:"to"`
	From          string         `json:"from"`
	URL           string         `json:"url"`
	Name          string         `json:"name"`
	Message       string         `json:"message"`
	MatchingRules []MatchingRule `json:"matchingRules,omitempty"`
}

// ErrNoChannel is a channel the directory does not have.
var ErrNoChannel = errors.New("no such channel")

// DigestKey is the node metadata key with the payload's digest.
const DigestKey = "io.outpost.release.digest"

// Graph builds the graph of channel for arch ("amd64" when empty; "multi"
// takes every release).
func (d *GraphDir) Graph(channel, arch string) (*Graph, error) {
	if arch == "" {
		arch = "amd64"
	}
	var ch *channelFile
	var chans []string
	err := eachYAML(filepath.Join(d.Dir, "channels"), func(name string, data []byte) error {
		var c channelFile
		if err := yaml.UnmarshalStrict(data, &c); err != nil {
			d.warn(filepath.Join(d.Dir, "channels", name), err)
			return nil
		}
		if c.Name == "" {
			d.warn(filepath.Join(d.Dir, "channels", name), errors.New("a channel file names its channel: name: stable-1"))
			return nil
		}
		chans = append(chans, c.Name)
		if c.Name == channel {
			ch = &c
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if ch == nil {
		return nil, fmt.Errorf("%w %q (the directory has %s)", ErrNoChannel, channel, strings.Join(chans, ", "))
	}
	releases, err := d.releases()
	if err != nil {
		return nil, err
	}
	g := &Graph{Nodes: []GraphNode{}, Edges: [][2]int{}}
	index := map[string]int{}
	for _, v := range ch.Versions {
		r, ok := releases[v]
		if !ok {
			return nil, fmt.Errorf("channel %s names %s, which no payload in releases/ is", channel, v)
		}
		if arch != "multi" && !slices.Contains(r.arch, "linux/"+arch) {
			continue
		}
		index[v] = len(g.Nodes)
		meta := map[string]string{ChannelsKey: channel, DigestKey: r.dig}
		if u := r.meta.Metadata["url"]; u != "" {
			meta["url"] = u
		}
		g.Nodes = append(g.Nodes, GraphNode{Version: v, Payload: PayloadRef(strings.TrimSuffix(d.BaseURL, "/")+"/releases/"+url.PathEscape(r.file), r.dig), Metadata: meta})
	}
	type edge struct{ from, to string }
	var edges []edge
	for _, n := range g.Nodes {
		for _, p := range releases[n.Version].meta.Previous {
			if _, ok := index[p]; ok {
				edges = append(edges, edge{p, n.Version})
			}
		}
	}
	conditional := map[edge][]Risk{}
	err = eachYAML(filepath.Join(d.Dir, "blocked-edges"), func(name string, data []byte) error {
		var b blockedEdge
		path := filepath.Join(d.Dir, "blocked-edges", name)
		if err := yaml.UnmarshalStrict(data, &b); err != nil {
			d.warn(path, err)
			return nil
		}
		if b.To == "" || b.From == "" || b.Name == "" {
			d.warn(path, errors.New("a blocked edge has to, from (a regular expression of versions) and name"))
			return nil
		}
		from, err := regexp.Compile("^(?:" + b.From + ")$")
		if err != nil {
			d.warn(path, fmt.Errorf("from: %w", err))
			return nil
		}
		edges = slices.DeleteFunc(edges, func(e edge) bool {
			if e.to != b.To || !from.MatchString(e.from) {
				return false
			}
			if len(b.MatchingRules) > 0 {
				conditional[e] = append(conditional[e], Risk{URL: b.URL, Name: b.Name, Message: b.Message, MatchingRules: b.MatchingRules})
			}
			return true
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, e := range edges {
		g.Edges = append(g.Edges, [2]int{index[e.from], index[e.to]})
	}
	for _, e := range slices.SortedFunc(maps.Keys(conditional), func(a, b edge) int {
		return strings.Compare(a.from+" "+a.to, b.from+" "+b.to)
	}) {
		ce := ConditionalEdge{Risks: conditional[e]}
		ce.Edges = append(ce.Edges, struct {
			From string `json:"from"`
			To   string `json:"to"`
		}{e.from, e.to})
		g.ConditionalEdges = append(g.ConditionalEdges, ce)
	}
	// What is served must parse: no cycle, no dangling version.
	raw, err := json.Marshal(g)
	if err != nil {
		return nil, err
	}
	if _, err := ParseGraph(raw); err != nil {
		return nil, err
	}
	return g, nil
}

type dirRelease struct {
	cachedPayload
	file string
}

// releases opens what is in releases/, by version; payloads seen before
// with the same size and time are not opened again.
func (d *GraphDir) releases() (map[string]dirRelease, error) {
	dir := filepath.Join(d.Dir, "releases")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cache == nil {
		d.cache = map[string]cachedPayload{}
	}
	out := map[string]dirRelease{}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") || strings.HasSuffix(e.Name(), ".partial") {
			continue
		}
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".tar") {
			d.warn(filepath.Join(dir, e.Name()), errors.New("releases/ holds payloads as .tar files (outpost adm release new --to-file)"))
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, err
		}
		c, ok := d.cache[e.Name()]
		if !ok || !c.mod.Equal(info.ModTime()) || c.size != info.Size() {
			c = cachedPayload{mod: info.ModTime(), size: info.Size()}
			p, err := Open(filepath.Join(dir, e.Name()))
			if err != nil {
				c.err = err
			} else {
				c.meta, c.dig = p.Metadata, p.Digest
				for _, b := range p.Binaries {
					c.arch = append(c.arch, b.Platform)
				}
			}
			d.cache[e.Name()] = c
		}
		if c.err != nil {
			d.warn(filepath.Join(dir, e.Name()), c.err)
			continue
		}
		if prev, dup := out[c.meta.Version]; dup {
			d.warn(filepath.Join(dir, e.Name()), fmt.Errorf("%s is version %s already", prev.file, c.meta.Version))
			continue
		}
		out[c.meta.Version] = dirRelease{cachedPayload: c, file: e.Name()}
	}
	return out, nil
}

func eachYAML(dir string, fn func(name string, data []byte) error) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() || (filepath.Ext(e.Name()) != ".yaml" && filepath.Ext(e.Name()) != ".yml") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		if err := fn(e.Name(), b); err != nil {
			return err
		}
	}
	return nil
}

// GraphPath is Cincinnati's path for a graph.
const GraphPath = "/api/upgrades_info/v1/graph"

// ServeHTTP serves GraphPath?channel=C&arch=A (JSON, as Cincinnati) and
// the payloads under /releases/.
func (d *GraphDir) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	switch {
	case r.URL.Path == GraphPath:
		channel := r.URL.Query().Get("channel")
		if channel == "" {
			writeJSONError(w, http.StatusBadRequest, "missing_params", "the channel parameter is required")
			return
		}
		g, err := d.Graph(channel, r.URL.Query().Get("arch"))
		if errors.Is(err, ErrNoChannel) {
			writeJSONError(w, http.StatusNotFound, "unknown_channel", err.Error())
			return
		}
		if err != nil {
			writeJSONError(w, http.StatusInternalServerError, "graph", err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(g)
	case strings.HasPrefix(r.URL.Path, "/releases/"):
		name, _ := SplitRef(strings.TrimPrefix(r.URL.Path, "/releases/")) // as the graph names it, pinned
		if name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") {
			http.NotFound(w, r)
			return
		}
		p := filepath.Join(d.Dir, "releases", name)
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			http.NotFound(w, r)
			return
		}
		http.ServeFile(w, r, p)
	default:
		http.NotFound(w, r)
	}
}

func writeJSONError(w http.ResponseWriter, code int, kind, value string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"kind": kind, "value": value})
}
