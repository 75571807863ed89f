package scenario

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/cli"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// outpost runs the CLI against the cluster's leader as admin and returns
// its stdout, stderr and exit code.
func (e *env) outpost(args ...string) (string, string, int) {
	e.t.Helper()
	path := filepath.Join(e.t.TempDir(), "admin.conf")
	if err := client.WriteConfig(path, e.c.Leader().Server.AdminConfig()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Setenv(client.EnvConfig, path)
	e.t.Setenv(client.EnvServer, "")
	e.t.Setenv(client.EnvToken, "")
	root := cli.NewRootCommand()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	code := cli.Execute(e.ctx, root)
	return out.String(), errb.String(), code
}

// `outpost delete` of a pod a node runs, as kubectl users know it (issue
// 10 item 1): Terminating in `get pods`, --grace-period, --now, and
// --force --grace-period 0 with kubectl's warning; by default it waits
// until the node has removed the pod.
func TestDeleteCLIGraceful(t *testing.T) {
	e := newEnv(t, 1, nil)
	e.node("n1", nil)
	for _, name := range []string{"web", "db", "cache"} {
		p := newPod(name, nil)
		p.Spec.NodeName = "n1"
		e.create(p)
	}

	if _, stderr, code := e.outpost("delete", "pod", "web", "--now", "--grace-period", "3"); code == 0 || !strings.Contains(stderr, "--now and --grace-period cannot be specified together") {
		t.Fatalf("--now with --grace-period: code %d, stderr %q", code, stderr)
	}

	out, stderr, code := e.outpost("delete", "pod", "web", "--grace-period", "0", "--wait=false")
	if code != 0 || out != "pod \"web\" deleted\n" {
		t.Fatalf("delete --grace-period 0: code %d, out %q, err %q", code, out, stderr)
	}
	// Without --force, 0 is taken as 1, as kubectl does.
	p := e.waitPod("web", "terminating", func(p *api.Pod) bool { return p.DeletionTimestamp != nil })
	if g := p.DeletionGracePeriodSeconds; g == nil || *g != 1 {
		t.Fatalf("grace period %v, want 1", g)
	}
	out, _, _ = e.outpost("get", "pods")
	if !strings.Contains(out, "Terminating") {
		t.Fatalf("get pods:\n%s\nwant web Terminating", out)
	}
	out, _, _ = e.outpost("describe", "pod", "web")
	if !strings.Contains(out, "Terminating (grace period") || !strings.Contains(out, "Termination Grace Period:  1s") {
		t.Fatalf("describe pod:\n%s\nwant its Terminating status and grace period", out)
	}

	// Waiting gives up at --timeout while nobody stops the pod.
	if _, stderr, code := e.outpost("delete", "pod", "db", "--timeout", "300ms"); code == 0 || !strings.Contains(stderr, "timed out waiting") {
		t.Fatalf("delete that cannot finish: code %d, stderr %q", code, stderr)
	}

	// --force: gone at once, with the warning.
	out, stderr, code = e.outpost("delete", "pod", "cache", "--force")
	if code != 0 || out != "pod \"cache\" force deleted\n" || !strings.Contains(stderr, "Warning: Immediate deletion does not wait for confirmation") {
		t.Fatalf("delete --force: code %d, out %q, err %q", code, out, stderr)
	}
	if _, err := e.cl.Get(e.ctx, podsR, "default", "cache", client.GetOptions{}); !api.IsNotFound(err) {
		t.Fatalf("force-deleted pod: %v", err)
	}

	// A waiting delete returns once the node has finished: here the
	// node's part is played by a force delete from outside, once the
	// CLI's delete (which shortens the grace period) is in.
	done := make(chan int, 1)
	go func() {
		_, _, code := e.outpost("delete", "pod", "db", "--grace-period", "20")
		done <- code
	}()
	e.waitPod("db", "with its grace period shortened", func(p *api.Pod) bool {
		return p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds == 20
	})
	zero := int64(0)
	if _, err := e.cl.DeleteWith(e.ctx, podsR, "default", "db", client.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != 0 {
		t.Fatalf("waiting delete ended with %d after the pod went", code)
	}
}
