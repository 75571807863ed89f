package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/version"
)

// readyTimeout bounds the raft round trip of one /readyz probe.
const readyTimeout = 2 * time.Second

var textOK = []string{"text/plain; charset=utf-8"}

// serveHealthz answers 200 while the process serves HTTP at all.
func (s *Server) serveHealthz(w http.ResponseWriter, _ *http.Request) {
	w.Header()["Content-Type"] = textOK
	_, _ = w.Write([]byte("ok"))
}

// serveReadyz answers 200 when this server can serve consistent reads and
// writes: raft has a leader, this server has applied everything the leader
// had committed a moment ago, and the cluster's bootstrap objects (the
// default namespace, the admin token) are in its store. Otherwise 503 with
// the reason.
func (s *Server) serveReadyz(w http.ResponseWriter, r *http.Request) {
	if reason := s.notReady(r.Context()); reason != "" {
		writeError(w, unavailable("not ready: "+reason, 1))
		return
	}
	w.Header()["Content-Type"] = textOK
	_, _ = w.Write([]byte("ok"))
}

// notReady returns why the server is not ready, or "".
func (s *Server) notReady(ctx context.Context) string {
	if s.stopCtx.Err() != nil {
		return "the server is shutting down"
	}
	if reason := s.core.CatchingUp(); reason != "" {
		return reason
	}
	if alarm := s.stateCheck.Alarm(); alarm != "" {
		return alarm
	}
	if s.node.Leader().ID == "" {
		return s.noLeader(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	idx, err := s.node.ReadIndex(ctx)
	if err != nil {
		return "cannot confirm the leader's commit index: " + err.Error()
	}
	if err := s.node.WaitApplied(ctx, idx); err != nil {
		return fmt.Sprintf("this server has applied index %d of %d", s.node.AppliedIndex(), idx)
	}
	if _, err := s.core.GetObject(namespacesResource, "", "default"); err != nil {
		return "the cluster is not bootstrapped yet: namespace default does not exist"
	}
	if _, err := s.core.GetObject(tokensResource, "", s.adminTokenID); err != nil {
		return "the cluster is not bootstrapped yet: the admin token does not exist"
	}
	return ""
}

// versionInfo is the body of /version, in the shape of Kubernetes'.
type versionInfo struct {
	Version    string `json:"version"`
	GitVersion string `json:"gitVersion"`
	GoVersion  string `json:"goVersion"`
	Platform   string `json:"platform"`
}

func (s *Server) serveVersion(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, versionInfo{
		Version:    version.Version,
		GitVersion: version.Version,
		GoVersion:  runtime.Version(),
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	})
}

// serveMetrics serves the server's registry to admins and servers.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request, id *auth.Identity) {
	if err := auth.Authorize(id, auth.Request{Verb: auth.VerbGet, Path: "/metrics"}, nil); err != nil {
		writeError(w, api.NewForbidden(err.Error()))
		return
	}
	s.metricsHandler.ServeHTTP(w, r)
}

// servePprof serves net/http/pprof's profiles under /debug/pprof/ to the
// callers that may read /metrics: enough to find where a slow server spends
// its time, with nothing of the cluster's objects in it.
func (s *Server) servePprof(w http.ResponseWriter, r *http.Request, id *auth.Identity) {
	if err := auth.Authorize(id, auth.Request{Verb: auth.VerbGet, Path: "/metrics"}, nil); err != nil {
		writeError(w, api.NewForbidden(err.Error()))
		return
	}
	switch name := strings.TrimPrefix(r.URL.Path, "/debug/pprof/"); name {
	case "profile":
		pprof.Profile(w, r)
	case "trace":
		pprof.Trace(w, r)
	case "", "/debug/pprof":
		pprof.Index(w, r)
	default:
		pprof.Handler(name).ServeHTTP(w, r)
	}
}

func newMetricsHandler(s *Server) http.Handler {
	return promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)})
}

// Discovery replies are fixed by the Resource table, so they are encoded
// once.
var (
	apiVersionsJSON = mustJSON(map[string]any{"kind": "APIVersions", "versions": []string{"v1"}})
	apiGroupsJSON   = mustJSON(apiGroupList())
	groupJSON       = func() map[string][]byte {
		m := map[string][]byte{}
		for _, g := range apiGroupList().Groups {
			g.Kind, g.APIVersion = "APIGroup", "v1"
			m[g.Name] = mustJSON(g)
		}
		return m
	}()
	resourceListJSON = func() map[string][]byte {
		m := map[string][]byte{}
		for g := range groupVersions {
			m[g] = mustJSON(resourceList(g))
		}
		return m
	}()
)

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // fixed data known at build time
	}
	return b
}

type groupVersion struct {
	GroupVersion string `json:"groupVersion"`
	Version      string `json:"version"`
}

type apiGroup struct {
	Kind             string         `json:"kind,omitempty"`
	APIVersion       string         `json:"apiVersion,omitempty"`
	Name             string         `json:"name"`
	Versions         []groupVersion `json:"versions"`
	PreferredVersion groupVersion   `json:"preferredVersion"`
}

type apiGroupListBody struct {
	Kind       string     `json:"kind"`
	APIVersion string     `json:"apiVersion"`
	Groups     []apiGroup `json:"groups"`
}

func apiGroupList() apiGroupListBody {
	l := apiGroupListBody{Kind: "APIGroupList", APIVersion: "v1"}
	seen := map[string]bool{}
	for _, r := range api.Resources {
		if r.Group == "" || seen[r.Group] {
			continue
		}
		seen[r.Group] = true
		gv := groupVersion{GroupVersion: r.Group + "/" + r.Version, Version: r.Version}
		l.Groups = append(l.Groups, apiGroup{Name: r.Group, Versions: []groupVersion{gv}, PreferredVersion: gv})
	}
	// Served from the agents' readings, not the Resource table
	// (metricsapi.go).
	l.Groups = append(l.Groups, apiGroup{Name: api.MetricsGroup, Versions: []groupVersion{metricsGroupVersion}, PreferredVersion: metricsGroupVersion})
	return l
}

type apiResource struct {
	Name         string   `json:"name"`
	SingularName string   `json:"singularName"`
	Namespaced   bool     `json:"namespaced"`
	Kind         string   `json:"kind"`
	Verbs        []string `json:"verbs"`
	ShortNames   []string `json:"shortNames,omitempty"`
}

type apiResourceList struct {
	Kind         string        `json:"kind"`
	APIVersion   string        `json:"apiVersion"`
	GroupVersion string        `json:"groupVersion"`
	Resources    []apiResource `json:"resources"`
}

func resourceList(group string) apiResourceList {
	l := apiResourceList{Kind: "APIResourceList", APIVersion: "v1", GroupVersion: groupVersions[group]}
	if group != "" {
		l.GroupVersion = group + "/" + groupVersions[group]
	}
	for _, r := range api.Resources {
		if r.Group != group {
			continue
		}
		l.Resources = append(l.Resources, apiResource{
			Name: r.Plural, SingularName: r.Singular, Namespaced: r.Namespaced, Kind: r.Kind,
			Verbs:      []string{verbCreate, verbDelete, verbGet, verbList, verbUpdate, verbWatch},
			ShortNames: r.ShortNames,
		})
		if r.HasStatus {
			l.Resources = append(l.Resources, apiResource{Name: r.Plural + "/status", Namespaced: r.Namespaced, Kind: r.Kind, Verbs: []string{verbGet, verbUpdate}})
		}
		if r.Plural == "pods" {
			l.Resources = append(l.Resources, apiResource{Name: "pods/binding", Namespaced: true, Kind: "Binding", Verbs: []string{verbCreate}})
		}
	}
	return l
}

// Discovery is open to every authenticated caller: it describes the fixed
// Resource table, nothing stored.
func (s *Server) serveAPIVersions(w http.ResponseWriter, _ *http.Request) {
	writeRaw(w, http.StatusOK, apiVersionsJSON)
}

func (s *Server) serveAPIGroups(w http.ResponseWriter, _ *http.Request) {
	writeRaw(w, http.StatusOK, apiGroupsJSON)
}

func (s *Server) serveGroup(w http.ResponseWriter, _ *http.Request, group string) {
	writeRaw(w, http.StatusOK, groupJSON[group])
}

func (s *Server) serveResourceList(w http.ResponseWriter, _ *http.Request, group string) {
	writeRaw(w, http.StatusOK, resourceListJSON[group])
}

// noLeader says why this server has no raft leader: most often an
// election or a lost quorum, but a server that was removed from the
// cluster never gets one again, and must say so.
func (s *Server) noLeader(ctx context.Context) string {
	if s.node.Removed(ctx) {
		return fmt.Sprintf("server %s was removed from the cluster and serves nothing; "+
			"to bring it back, stop it, empty its data directory and start it again with --join", s.cfg.ID)
	}
	return "the cluster has no raft leader (an election is under way, or fewer than a quorum of servers are up)"
}
