package repo

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

type pkg struct {
	ImportPath   string
	Dir          string
	Doc          string
	Name         string
	Deps         []string
	Imports      []string
	TestGoFiles  []string
	XTestGoFiles []string
}

func goList(t *testing.T, args ...string) []pkg {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-json"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// Every package says what it holds (STYLE: package docs everywhere).
func TestEveryPackageHasADocComment(t *testing.T) {
	for _, p := range goList(t, "github.com/outpost-edge/outpost/...") {
		if strings.TrimSpace(p.Doc) == "" {
			t.Errorf("package %s has no package comment (add a doc.go)", p.ImportPath)
		}
	}
}

// The binary links only the dependencies chosen for the job; a new one
// must be added here on purpose, with the reason in the commit.
func TestBinaryDependencies(t *testing.T) {
	allowed := []string{
		"github.com/outpost-edge/outpost/",
		"github.com/hashicorp/raft",
		"github.com/hashicorp/go-hclog",
		"github.com/hashicorp/go-metrics", // raft's metrics
		"github.com/hashicorp/go-msgpack", // raft's wire format
		"github.com/hashicorp/go-immutable-radix",
		"github.com/hashicorp/golang-lru",
		"github.com/armon/go-metrics",
		"go.etcd.io/bbolt",
		"github.com/spf13/cobra",
		"github.com/spf13/pflag",
		"github.com/inconshreveable/mousetrap",
		"github.com/prometheus/",
		"github.com/beorn7/perks",
		"github.com/cespare/xxhash",
		"github.com/munnerz/goautoneg",
		"google.golang.org/protobuf", // prometheus' exposition format
		// encoding/json/v2's own module: one JSON engine in every build,
		// with or without GOEXPERIMENT=jsonv2 (issue 9 item 4).
		"github.com/go-json-experiment/json",
		"sigs.k8s.io/yaml",
		"go.yaml.in/yaml",
		"github.com/fatih/color", // hclog
		"github.com/mattn/go-colorable",
		"github.com/mattn/go-isatty",
		"golang.org/x/sys",
		// hashicorp/memberlist: the gossip pool of servers and agents
		// (package gossip), and what it links.
		"github.com/hashicorp/memberlist",
		"github.com/hashicorp/go-multierror",
		"github.com/hashicorp/errwrap",
		"github.com/hashicorp/go-sockaddr", // advertise address discovery
		"github.com/miekg/dns",             // resolving join addresses
		"golang.org/x/net",                 // miekg/dns
		"github.com/google/btree",
		"github.com/sean-/seed",
		// agent/podnet: libcni, the CNI ecosystem's way of calling
		// network plugins (issue 14 names it); it was in the module
		// graph already through containerd.
		"github.com/containernetworking/cni/",
		// runtime/containerd: the containerd client and what it links.
		"github.com/containerd/",
		"github.com/opencontainers/", // OCI image and runtime specs, selinux labels
		"github.com/distribution/reference",
		"github.com/docker/go-events",
		"github.com/cyphar/filepath-securejoin",
		"github.com/moby/",
		"github.com/sirupsen/logrus", // containerd's log package
		"github.com/gogo/protobuf",
		"github.com/golang/protobuf",
		"github.com/google/uuid",
		"github.com/google/go-cmp", // protobuf's generated code (grpc)
		"github.com/klauspost/compress",
		"github.com/felixge/httpsnoop", // otel's grpc/http instrumentation
		"github.com/go-logr/",
		"go.opentelemetry.io/",
		"golang.org/x/sync",
		"golang.org/x/text",
		"google.golang.org/grpc",
		"google.golang.org/genproto",
		// go-systemd: sd_notify READY and the watchdog of the agent, and
		// the D-Bus calls of a config update (osupdate/systemd: unit
		// files, daemon-reload, unit states; logind's reboot through
		// godbus, go-systemd's own D-Bus library).
		"github.com/coreos/go-systemd/v22/daemon",
		"github.com/coreos/go-systemd/v22/dbus",
		"github.com/godbus/dbus/v5",
	}
	ps := goList(t, "github.com/outpost-edge/outpost/cmd/outpost")
	if len(ps) != 1 {
		t.Fatalf("go list returned %d packages", len(ps))
	}
	for _, d := range ps[0].Deps {
		first, _, _ := strings.Cut(d, "/")
		if !strings.Contains(first, ".") {
			continue // standard library
		}
		ok := false
		for _, a := range allowed {
			if strings.HasPrefix(d, a) {
				ok = true
				break
			}
		}
		if !ok {
			t.Errorf("outpost links %s, which is not among the chosen dependencies", d)
		}
		if strings.HasPrefix(d, "github.com/outpost-edge/outpost/testing/") {
			t.Errorf("outpost links test harness package %s", d)
		}
	}
}

// No package of the binary imports the standard library's testing
// packages; hashicorp/raft does (its testing.go), which we cannot change.
func TestBinaryDoesNotImportTesting(t *testing.T) {
	for _, p := range goList(t, "-deps", "github.com/outpost-edge/outpost/cmd/outpost") {
		if p.ImportPath == "github.com/hashicorp/raft" {
			continue
		}
		for _, imp := range p.Imports {
			if imp == "testing" || strings.HasPrefix(imp, "testing/") || strings.HasPrefix(imp, "github.com/outpost-edge/outpost/testing") {
				t.Errorf("%s imports %s into the outpost binary", p.ImportPath, imp)
			}
		}
	}
}

// Every package with tests is in one of make test's package lists
// (RACE_PKGS, OTHER_PKGS): a package left out has tests CI never runs.
func TestMakeTestRunsEveryPackage(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(mk), "\\\n", " ")
	var patterns []string
	for _, l := range strings.Split(text, "\n") {
		for _, v := range []string{"RACE_PKGS :=", "OTHER_PKGS :="} {
			if rest, ok := strings.CutPrefix(l, v); ok {
				patterns = append(patterns, strings.Fields(rest)...)
			}
		}
	}
	if len(patterns) < 5 {
		t.Fatalf("found %d package patterns in the Makefile: %v", len(patterns), patterns)
	}
	for _, p := range goList(t, mod+"...") {
		if len(p.TestGoFiles)+len(p.XTestGoFiles) == 0 {
			continue
		}
		rel := strings.TrimPrefix(p.ImportPath, mod)
		covered := false
		for _, pat := range patterns {
			pat = strings.TrimPrefix(pat, "./")
			if base, ok := strings.CutSuffix(pat, "/..."); ok {
				covered = covered || rel == base || strings.HasPrefix(rel, base+"/")
			} else {
				covered = covered || rel == pat
			}
		}
		if !covered {
			t.Errorf("%s has tests that make test does not run: add it to RACE_PKGS or OTHER_PKGS in the Makefile", rel)
		}
	}
}
