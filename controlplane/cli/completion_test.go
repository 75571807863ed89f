package cli

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// complete runs cobra's hidden __complete command, as the shell scripts
// do, and returns the candidates (descriptions dropped) and the
// directive line.
func complete(t *testing.T, args ...string) (cands []string, directive string, stderr string) {
	t.Helper()
	r := runCLI(t, t.Context(), "", append([]string{cobra.ShellCompRequestCmd}, args...)...)
	if r.code != 0 {
		t.Fatalf("__complete %q: exit %d, stderr %q", args, r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	directive = lines[len(lines)-1]
	for _, l := range lines[:len(lines)-1] {
		c, _, _ := strings.Cut(l, "\t")
		cands = append(cands, c)
	}
	return cands, directive, r.stderr
}

func seedCompletion(f *fakeAPI) {
	seedPods(f)
	f.put(podR, `{"metadata":{"name":"multi","namespace":"default"},"spec":{"initContainers":[{"name":"setup"}],"containers":[{"name":"app"},{"name":"sidecar"}]}}`)
	f.put(nodeR, `{"metadata":{"name":"edge-2"}}`)
	f.put(nodeR, `{"metadata":{"name":"edge-1"}}`)
	f.put(nodeR, `{"metadata":{"name":"core-1"}}`)
	f.put(deployR, `{"metadata":{"name":"web","namespace":"default"}}`)
	f.put(deployR, `{"metadata":{"name":"api","namespace":"default"}}`)
	f.put(deployR, `{"metadata":{"name":"shop-api","namespace":"team"}}`)
	f.put(namespaceResource, `{"metadata":{"name":"default"}}`)
	f.put(namespaceResource, `{"metadata":{"name":"team"}}`)
}

func TestCompletion(t *testing.T) {
	f := newFakeAPI(t)
	seedCompletion(f)
	srv := []string{"--server", f.srv.URL, "--insecure"}
	line := func(args ...string) []string { return append(slices.Clone(srv), args...) }
	const noFile = ":4"   // ShellCompDirectiveNoFileComp
	const noFileNS = ":6" // ... | ShellCompDirectiveNoSpace

	for _, tc := range []struct {
		name      string
		args      []string
		want      []string
		directive string
	}{
		{"kinds of get", line("get", "d"), []string{"deployments", "deploy", "daemonsets", "ds"}, noFile},
		{"short names", line("get", "p"), []string{"pods", "po", "poddisruptionbudgets", "pdb"}, noFile},
		{"second kind of a list", line("get", "pods,no"), []string{"pods,nodes", "pods,no"}, noFile},
		{"pod names of the default namespace", line("get", "pods", ""), []string{"db-0", "multi", "web-1"}, noFile},
		{"by short name, with a prefix", line("get", "po", "w"), []string{"web-1"}, noFile},
		{"names already given are not offered", line("delete", "pods", "web-1", ""), []string{"db-0", "multi"}, noFile},
		{"-n before the verb", line("-n", "team", "get", "pods", ""), []string{"other"}, noFile},
		{"--namespace after the kind", line("describe", "deploy", "--namespace", "team", ""), []string{"shop-api"}, noFile},
		{"TYPE/NAME", line("scale", "deployment/"), []string{"deployment/api", "deployment/web"}, noFile},
		{"TYPE/NAME with a prefix", line("get", "deploy/w"), []string{"deploy/web"}, noFile},
		{"scale offers only what it scales", line("scale", ""), []string{"replicasets", "rs", "deployments", "deploy"}, noFile},
		{"scale refuses pods", line("scale", "pods/"), nil, noFile},
		{"more TYPE/NAME: kinds with a slash", line("get", "deploy/web", "no"), []string{"nodes/", "no/"}, noFileNS},
		{"rollout status", line("rollout", "status", "deployment/a"), []string{"deployment/api"}, noFile},
		{"logs", line("logs", ""), []string{"db-0", "multi", "web-1"}, noFile},
		{"logs takes one pod", line("logs", "web-1", ""), nil, noFile},
		{"exec", line("exec", "m"), []string{"multi"}, noFile},
		{"containers of the pod", line("logs", "multi", "-c", ""), []string{"app", "sidecar", "setup"}, noFile},
		{"containers of pod/NAME", line("exec", "pod/multi", "--container", "s"), []string{"sidecar", "setup"}, noFile},
		{"namespaces", line("get", "pods", "-n", ""), []string{"default", "team"}, noFile},
		{"drain", line("drain", ""), []string{"core-1", "edge-1", "edge-2"}, noFile},
		{"adm drain", line("adm", "drain", "e"), []string{"edge-1", "edge-2"}, noFile},
		{"cordon several", line("cordon", "edge-1", ""), []string{"core-1", "edge-2"}, noFile},
		{"adm uncordon", line("adm", "uncordon", "c"), []string{"core-1"}, noFile},
		{"taint: the word nodes", line("taint", ""), []string{"nodes", "no"}, noFile},
		{"taint nodes", line("adm", "taint", "nodes", "edge-"), []string{"edge-1", "edge-2"}, noFile},
		{"taint nodes: not the taint itself", line("taint", "nodes", "edge-1", "key=v:"), nil, noFile},
		{"image import --node", line("image", "import", "a.tar", "--node", "ed"), []string{"edge-1", "edge-2"}, noFile},
		{"image import --node a list", line("image", "import", "a.tar", "--node", "edge-1,"), []string{"edge-1,core-1", "edge-1,edge-2"}, noFile},
		{"subcommands are cobra's", line("adm", "up"), []string{"upgrade"}, noFile},
		{"top nodes", line("top", "nodes", "edge"), []string{"edge-1", "edge-2"}, noFile},
		{"top pods", line("top", "pods", "w"), []string{"web-1"}, noFile},
		{"set image", line("set", "image", "deployment/"), []string{"deployment/api", "deployment/web"}, noFile},
		{"top pods, empty word", line("top", "pods", ""), []string{"db-0", "multi", "web-1"}, noFile},
		{"top pod (alias), empty word", line("top", "pod", ""), []string{"db-0", "multi", "web-1"}, noFile},
		{"top pods -n", line("top", "pods", "-n", "team", ""), []string{"other"}, noFile},
		{"top nodes, empty word", line("top", "nodes", ""), []string{"core-1", "edge-1", "edge-2"}, noFile},
		{"get offers the category all", line("get", "a"), []string{"all"}, noFile},
		{"all in a list", line("get", "pods,al"), []string{"pods,all"}, noFile},
		{"describe all", line("describe", "al"), []string{"all"}, noFile},
		{"scale offers no category", line("scale", "a"), nil, noFile},
		{"get -o", line("get", "pods", "-o", ""), []string{"json", "yaml", "wide", "name", "jsonpath=", "custom-columns=", "jsonpath-file=", "custom-columns-file="}, noFile},
		{"get -o with a prefix", line("get", "pods", "-o", "custom"), []string{"custom-columns=", "custom-columns-file="}, noFileNS},
		{"get --output=", line("get", "pods", "--output=n"), []string{"name"}, noFile},
		{"wait --for", line("wait", "pods/web-1", "--for", ""), []string{"condition=", "delete", "jsonpath="}, noFile},
		{"wait --for=cond", line("wait", "pods/web-1", "--for=cond"), []string{"condition="}, noFileNS},
		{"wait --for=condition=", line("wait", "pods/web-1", "--for=condition=P"), []string{"condition=PodScheduled", "condition=Progressing"}, noFile},
		{"explain kinds", line("explain", "dep"), []string{"deployments", "deploy"}, noFile},
		{"explain fields", line("explain", "deploy.spec.st"), []string{"deploy.spec.strategy"}, noFileNS},
		{"explain fields of a list's elements", line("explain", "pods.spec.containers.im"), []string{"pods.spec.containers.image", "pods.spec.containers.imagePullPolicy"}, noFileNS},
		{"explain of an unknown field", line("explain", "pods.nope."), nil, noFile},
		{"explain takes one argument", line("explain", "pods", ""), nil, noFile},
		{"rollout pause", line("rollout", "pause", "deployment/w"), []string{"deployment/web"}, noFile},
	} {
		got, directive, _ := complete(t, tc.args...)
		if !slices.Equal(got, tc.want) || directive != tc.directive {
			t.Errorf("%s: %q gave %q %s, want %q %s", tc.name, tc.args, got, directive, tc.want, tc.directive)
		}
	}
}

// TestCompletionKindsListEveryResource checks that `get <TAB>` offers
// every kind by plural and short name, with the kind as description.
func TestCompletionKindsListEveryResource(t *testing.T) {
	r := runCLI(t, t.Context(), "", cobra.ShellCompRequestCmd, "get", "")
	for _, res := range api.Resources {
		if !strings.Contains(r.stdout, "\n"+res.Plural+"\t"+res.Kind+"\n") && !strings.HasPrefix(r.stdout, res.Plural+"\t"+res.Kind+"\n") {
			t.Errorf("get <TAB> lacks %s:\n%s", res.Plural, r.stdout)
		}
		for _, s := range res.ShortNames {
			if !strings.Contains(r.stdout, "\n"+s+"\tshort for "+res.Plural+"\n") {
				t.Errorf("get <TAB> lacks short name %s", s)
			}
		}
	}
}

// TestCompletionFailsQuietly: with no server, a refused token or a server
// that never answers, completion offers nothing, prints no error and
// gives up quickly.
func TestCompletionFailsQuietly(t *testing.T) {
	f := newFakeAPI(t)
	seedCompletion(f)

	got, directive, stderr := complete(t, "get", "pods", "")
	if got != nil || directive != ":4" || strings.Contains(stderr, "rror") {
		t.Errorf("no server: %q %s, stderr %q", got, directive, stderr)
	}

	got, directive, stderr = complete(t, "--server", "ftp://x", "get", "pods", "")
	if got != nil || directive != ":4" || strings.Contains(stderr, "rror") {
		t.Errorf("bad server: %q %s, stderr %q", got, directive, stderr)
	}

	// A server that accepts connections and never replies.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	old := completionTimeout
	completionTimeout = 300 * time.Millisecond
	t.Cleanup(func() { completionTimeout = old })
	start := time.Now()
	got, directive, stderr = complete(t, "--server", "http://"+l.Addr().String(), "--insecure", "logs", "")
	if took := time.Since(start); took > completionTimeout+time.Second {
		t.Errorf("a silent server held completion for %s", took)
	}
	if got != nil || directive != ":4" || strings.Contains(stderr, "rror") {
		t.Errorf("silent server: %q %s, stderr %q", got, directive, stderr)
	}
}

// TestCompletionUnknownShell: a shell without a script is an error, not
// completion's help with exit 0 (issue 15 review item 4); the scripts
// are still written.
func TestCompletionUnknownShell(t *testing.T) {
	ctx := context.Background()
	hint := "See 'outpost completion --help' for usage.\n"
	expect(t, "tcsh", runCLI(t, ctx, "", "completion", "tcsh"), 1, "",
		"error: unsupported shell \"tcsh\": use bash, fish, powershell or zsh\n"+hint)
	expect(t, "none", runCLI(t, ctx, "", "completion"), 1, "",
		"error: no shell given: use bash, fish, powershell or zsh, e.g. `outpost completion bash`\n"+hint)
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		res := runCLI(t, ctx, "", "completion", shell)
		if res.code != 0 || !strings.Contains(res.stdout, "outpost") || res.stderr != "" {
			t.Errorf("completion %s: exit %d, %d bytes, stderr %q", shell, res.code, len(res.stdout), res.stderr)
		}
	}
}
