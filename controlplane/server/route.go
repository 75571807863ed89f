package server

import (
	"net/http"
	"strings"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Verbs, as the authorizer and the metrics name them.
const (
	verbGet    = "get"
	verbList   = "list"
	verbWatch  = "watch"
	verbCreate = "create"
	verbUpdate = "update"
	verbDelete = "delete"
)

// Subresources the API serves.
const (
	subStatus  = "status"
	subBinding = "binding"
	// subEviction is pods/NAME/eviction (policy/v1 Eviction).
	subEviction = "eviction"
)

// route is what a resource URL names.
type route struct {
	res   *api.Resource
	ns    string // "" for cluster-scoped resources and all-namespace lists
	name  string
	sub   string // "", "status" or "binding"
	verb  string
	watch bool // the /watch/ path prefix was used
}

// resourcesByGroup maps group → plural → resource, so a lookup does not
// build a key string on the hot path.
var resourcesByGroup = func() map[string]map[string]*api.Resource {
	m := map[string]map[string]*api.Resource{}
	for _, r := range api.Resources {
		if m[r.Group] == nil {
			m[r.Group] = map[string]*api.Resource{}
		}
		m[r.Group][r.Plural] = r
	}
	return m
}()

// groupVersions maps each served group to its version.
var groupVersions = func() map[string]string {
	m := map[string]string{}
	for _, r := range api.Resources {
		m[r.Group] = r.Version
	}
	return m
}()

// segments splits p ("/a/b/c") into at most len(dst) segments without
// allocating; ok is false when there are more, or an empty segment.
func segments(p string, dst []string) (n int, ok bool) {
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		return 0, true
	}
	for {
		if n == len(dst) {
			return n, false
		}
		seg, rest, more := strings.Cut(p, "/")
		if seg == "" {
			// A trailing slash is tolerated, an inner empty one is not.
			return n, !more && n > 0
		}
		dst[n] = seg
		n++
		if !more {
			return n, true
		}
		p = rest
	}
}

// parseResourcePath reads the resource part of a path: segs are what
// follows /api/v1 or /apis/GROUP/VERSION. It returns a NotFound error for
// paths the API does not serve.
func parseResourcePath(group string, segs []string) (route, error) {
	var rt route
	byPlural := resourcesByGroup[group]
	if len(segs) > 0 && segs[0] == "watch" {
		rt.watch = true
		segs = segs[1:]
	}
	if len(segs) == 0 {
		return rt, notFoundPath()
	}
	if segs[0] == "namespaces" && len(segs) >= 3 {
		if r := byPlural[segs[2]]; r != nil && r.Namespaced {
			rt.res, rt.ns = r, segs[1]
			segs = segs[3:]
			return rt.withNameAndSub(segs)
		}
	}
	r := byPlural[segs[0]]
	if r == nil || (r.Namespaced && len(segs) > 1) {
		// A namespaced object is only reachable under its namespace.
		return rt, notFoundPath()
	}
	rt.res = r
	return rt.withNameAndSub(segs[1:])
}

// withNameAndSub reads the optional NAME and SUBRESOURCE segments.
func (rt route) withNameAndSub(segs []string) (route, error) {
	switch len(segs) {
	case 0:
	case 1:
		rt.name = segs[0]
	case 2:
		rt.name, rt.sub = segs[0], segs[1]
		switch {
		case rt.sub == subStatus && rt.res.HasStatus:
		case rt.sub == subBinding && rt.res.Plural == "pods":
		case rt.sub == subEviction && rt.res.Plural == "pods":
		default:
			return rt, notFoundPath()
		}
	default:
		return rt, notFoundPath()
	}
	if rt.watch && (rt.name != "" || rt.sub != "") {
		// Kubernetes' /watch/.../NAME form; served as a watch with a
		// name field selector would be, but outpost keeps it simple.
		return rt, notFoundPath()
	}
	return rt, nil
}

// verbFor maps the method to a verb for rt, or fails with 405.
func verbFor(method string, rt *route, watchQuery bool) (string, error) {
	switch method {
	case http.MethodGet, http.MethodHead:
		if rt.sub == subBinding || rt.sub == subEviction {
			break
		}
		if rt.name != "" {
			return verbGet, nil
		}
		if rt.watch || watchQuery {
			return verbWatch, nil
		}
		return verbList, nil
	case http.MethodPost:
		if rt.watch {
			break
		}
		if rt.name == "" {
			return verbCreate, nil
		}
		if rt.sub == subBinding || rt.sub == subEviction {
			return verbCreate, nil
		}
	case http.MethodPut:
		if rt.name != "" && rt.sub != subBinding && rt.sub != subEviction && !rt.watch {
			return verbUpdate, nil
		}
	case http.MethodDelete:
		if rt.name != "" && rt.sub == "" && !rt.watch {
			return verbDelete, nil
		}
	}
	return "", api.NewMethodNotAllowed(method + " is not supported on " + rt.describe())
}

// describe names rt in messages: "pods/status".
func (rt *route) describe() string {
	s := rt.res.Plural
	if rt.name != "" {
		s += " " + rt.name
	}
	if rt.sub != "" {
		s += "/" + rt.sub
	}
	return s
}

func notFoundPath() *api.StatusError {
	return statusErr(http.StatusNotFound, api.ReasonNotFound, "the server could not find the requested resource")
}
