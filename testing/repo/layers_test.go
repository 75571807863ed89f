package repo

import (
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/outpost-edge/outpost/"

// layers says, for each package (and those under it), which packages it
// must not depend on, directly or through others: the layers of
// docs/ARCHITECTURE.md from the bottom (api, raftstore, store) through
// the loops (scheduler, controllers) to the transports on top (server's
// HTTP API, the client, the CLI, the agent). A change that makes a lower
// layer reach up, or a client reach into the control plane's insides,
// fails here (issue 9 item 9, as tailscale's depaware tests).
var layers = []struct {
	pkg    string
	forbid []string
	// exact: the rule is for pkg alone, not the packages under it.
	exact bool
	// allow are packages under a forbidden one that pkg may use.
	allow []string
}{
	// Types and pure logic: nothing of the control plane's machinery.
	{"controlplane/api", []string{"controlplane/", "raftstore", "agent", "gossip", "runtime"}, false, nil},
	{"controlplane/pki", []string{"controlplane/api", "controlplane/server", "raftstore", "agent"}, false, nil},
	{"controlplane/scheduler", []string{"controlplane/store", "controlplane/server", "controlplane/client", "controlplane/controller", "raftstore", "agent"}, true, nil},
	{"controlplane/scheduler/policy", []string{"controlplane/store", "controlplane/server", "controlplane/client", "controlplane/controller", "raftstore", "agent"}, false, nil},
	{"controlplane/scheduler/taints", []string{"controlplane/store", "controlplane/server", "controlplane/client", "controlplane/controller", "raftstore", "agent"}, false, nil},
	// The event correlator is shared by the agent and the controllers:
	// it sees only the API's types and the Sink each hands it.
	{"controlplane/events", []string{"controlplane/server", "controlplane/store", "controlplane/core", "controlplane/client", "controlplane/controller", "raftstore", "agent"}, false, nil},
	// Replication knows nothing of what it replicates.
	{"raftstore", []string{"controlplane/", "agent", "gossip", "runtime"}, false, nil},
	// The store is the state machine: no transport, no loops, no auth.
	{"controlplane/store", []string{"controlplane/server", "controlplane/client", "controlplane/auth", "controlplane/admission", "controlplane/controller", "controlplane/controllers", "controlplane/scheduler", "agent", "gossip"}, false, nil},
	{"controlplane/auth", []string{"controlplane/server", "controlplane/store", "controlplane/client", "raftstore"}, false, nil},
	{"controlplane/admission", []string{"controlplane/server", "controlplane/store", "controlplane/client", "raftstore"}, false, nil},
	// The core: the write pipeline, leadership and the store's reads,
	// with no transport (no net/http, see transportFree), no loops and no
	// clients of the API above it.
	{"controlplane/core", []string{"controlplane/server", "controlplane/client", "controlplane/cli", "controlplane/controllers", "controlplane/scheduler/loop", "agent", "gossip"}, false, nil},
	// The leader's loops talk to a controller.Client: never to the HTTP
	// server or client, never to raft, the store or the core (they are
	// handed the core's client).
	{"controlplane/controller", []string{"controlplane/server", "controlplane/client", "raftstore", "agent", "gossip", "controlplane/core"}, false, nil},
	{"controlplane/controller", []string{"controlplane/store"}, true, nil},
	{"controlplane/controllers", []string{"controlplane/server", "controlplane/client", "raftstore", "agent", "gossip", "controlplane/core", "controlplane/store"}, false, nil},
	{"controlplane/scheduler/loop", []string{"controlplane/server", "controlplane/client", "raftstore", "agent", "gossip", "controlplane/core", "controlplane/store"}, false, nil},
	// Clients of the API: the API's types and the HTTP client only.
	{"controlplane/client", []string{"controlplane/server", "controlplane/store", "raftstore", "controlplane/controller", "controlplane/scheduler/loop", "agent/host", "runtime"}, false, nil},
	{"controlplane/cli", []string{"controlplane/server", "controlplane/store", "raftstore", "controlplane/controller", "controlplane/controllers", "controlplane/scheduler/loop"}, false, nil},
	// The agent applies the toleration rules (TNT-2/4) as the control
	// plane does when it fences itself (TNT-9): the same pure package.
	{"agent", []string{"controlplane/server", "controlplane/store", "raftstore", "controlplane/controller", "controlplane/controllers", "controlplane/scheduler"}, false,
		[]string{"controlplane/scheduler/taints"}},
	{"gossip", []string{"controlplane/", "raftstore", "agent", "runtime"}, false, nil},
	{"runtime", []string{"controlplane/", "raftstore", "agent", "gossip"}, false, nil},
}

// transportFree are packages that must not speak HTTP themselves: the
// core is called by the HTTP server, never the other way round.
var transportFree = []string{"controlplane/core", "controlplane/store", "controlplane/controller", "controlplane/controllers", "controlplane/scheduler/loop"}

func TestLayers(t *testing.T) {
	pkgs := goList(t, mod+"...")
	checked := map[string]bool{}
	for _, p := range pkgs {
		rel := strings.TrimPrefix(p.ImportPath, mod)
		for _, l := range layers {
			if rel != l.pkg && (l.exact || !strings.HasPrefix(rel, l.pkg+"/")) {
				continue
			}
			checked[l.pkg] = true
			for _, d := range p.Deps {
				dr, ok := strings.CutPrefix(d, mod)
				if !ok {
					continue
				}
				if strings.HasPrefix(dr, "testing/") {
					t.Errorf("%s depends on %s: test support is for tests only", rel, dr)
				}
				if slices.Contains(l.allow, dr) {
					continue
				}
				for _, f := range l.forbid {
					if (dr == strings.TrimSuffix(f, "/") || strings.HasPrefix(dr, strings.TrimSuffix(f, "/")+"/")) && !strings.HasPrefix(dr, l.pkg) {
						t.Errorf("%s depends on %s, which its layer must not reach (see layers in %s)", rel, dr, "testing/repo/layers_test.go")
					}
				}
			}
		}
	}
	for _, p := range pkgs {
		rel := strings.TrimPrefix(p.ImportPath, mod)
		if slices.Contains(transportFree, rel) && slices.Contains(p.Imports, "net/http") {
			t.Errorf("%s imports net/http: it is below the transports (see transportFree in testing/repo/layers_test.go)", rel)
		}
	}
	for _, l := range layers {
		if !checked[l.pkg] {
			t.Errorf("layer rule for %s matches no package: renamed?", l.pkg)
		}
	}
	// No package outside testing/ may link test support.
	for _, p := range pkgs {
		rel := strings.TrimPrefix(p.ImportPath, mod)
		if strings.HasPrefix(rel, "testing/") {
			continue
		}
		if i := slices.IndexFunc(p.Deps, func(d string) bool { return strings.HasPrefix(d, mod+"testing/") }); i >= 0 {
			t.Errorf("%s depends on %s: test support is for tests only", rel, p.Deps[i])
		}
	}
}
