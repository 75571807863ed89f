package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/testing/netns"
)

// podNetworkManifest is two pods on edge-1 serving on one port, each in
// a network of its own.
const podNetworkManifest = `apiVersion: v1
kind: Pod
metadata: {name: web-a, labels: {app: web}}
spec:
  nodeName: edge-1
  containers:
  - {name: web, image: ` + demoImage + `, imagePullPolicy: Never, args: ["serve", "-port", "8080"], ports: [{containerPort: 8080}]}
---
apiVersion: v1
kind: Pod
metadata: {name: web-b, labels: {app: web}}
spec:
  nodeName: edge-1
  containers:
  - {name: web, image: ` + demoImage + `, imagePullPolicy: Never, args: ["serve", "-port", "8080"], ports: [{containerPort: 8080}]}
`

// Issue 14, "How it is checked", bullets 1, 4 and 6, with the real CNI
// plugins and containerd (SPEC NET-1, NET-2): two pods on one node bind
// one port, each in a network namespace of its own with an address of
// the node's pod CIDR, reachable at it (through a route to the node, as
// host-gw routes); an agent killed and started again keeps the pods, their
// addresses and their reachability; a pod deleted gives its namespace
// back; a pod reaches a Service by its name through the node's resolver.
func TestPodNetworkRealCNI(t *testing.T) {
	requireReal(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	_, archive := buildDemo(t)
	root := t.TempDir()
	h := netns.New(t, 51)
	c := startServer(t, root, h.Gateway)
	nsDir := filepath.Join(root, "n1-netns")
	n := newAgent(t, "edge-1", h, filepath.Join(root, "n1"), fmt.Sprintf("https://%s:%d", h.Gateway, c.apiPort), c.joinString(ctx),
		"--heartbeat", "1s", "--pod-network", "cni", "--cni-conf-dir", filepath.Join(root, "n1-net.d"), "--cni-netns-dir", nsDir)
	n.shareMounts(nsDir)
	n.start()
	c.waitReady("edge-1", "True", time.Minute)
	c.importImage(ctx, archive, "edge-1")
	node, err := c.node(ctx, "edge-1")
	if err != nil {
		t.Fatal(err)
	}
	cidr, err := netip.ParsePrefix(node.Spec.PodCIDR)
	if err != nil {
		t.Fatalf("edge-1's pod CIDR %q: %v", node.Spec.PodCIDR, err)
	}
	// The host-gw route to the node's pods, from this machine.
	if out, err := exec.Command("ip", "route", "add", cidr.String(), "via", h.Addr).CombinedOutput(); err != nil {
		t.Fatalf("route to the pods: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "route", "del", cidr.String()).Run() })

	c.apply(ctx, "pods", podNetworkManifest)
	ips := map[string]string{}
	waitFor(t, 2*time.Minute, "both pods running with addresses of their own", func() (bool, string) {
		var state []string
		for _, name := range []string{"web-a", "web-b"} {
			p, err := c.pod(ctx, name)
			if err != nil {
				return false, err.Error()
			}
			state = append(state, fmt.Sprintf("%s %s ip=%s ips=%v", name, p.Status.Phase, p.Status.PodIP, p.Status.PodIPs))
			ip, err := netip.ParseAddr(p.Status.PodIP)
			if p.Status.Phase != "Running" || err != nil || !cidr.Contains(ip) || len(p.Status.PodIPs) != 1 || p.Status.PodIPs[0].IP != p.Status.PodIP {
				return false, strings.Join(state, "; ")
			}
			ips[name] = p.Status.PodIP
		}
		return ips["web-a"] != ips["web-b"], strings.Join(state, "; ")
	})
	get := func(ip string) (string, error) {
		cl := &http.Client{Timeout: 3 * time.Second}
		resp, err := cl.Get("http://" + ip + ":8080/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	reach := func(when string) {
		t.Helper()
		for name, ip := range ips {
			waitFor(t, 30*time.Second, name+" answering at its address "+when, func() (bool, string) {
				body, err := get(ip)
				if err != nil {
					return false, err.Error()
				}
				// The demo says its host name: the pod's, in its own
				// network.
				return strings.Contains(body, "on "+name), body
			})
		}
	}
	reach("")

	// SPEC NET-4: a pod finds a Service by its short name (the search
	// path of its resolv.conf, ClusterFirst) through the node's resolver,
	// and reaches it.
	c.apply(ctx, "by-name", `apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: by-name}
spec:
  nodeName: edge-1
  restartPolicy: OnFailure
  containers:
  - {name: get, image: `+demoImage+`, imagePullPolicy: Never, args: ["get", "http://web/"]}
`)
	c.waitSucceededSaying(ctx, "by-name", "a pod reaching the Service web by its name", func(*api.Pod) string { return "on web-" })

	// An agent killed and started again adopts the pods and their
	// networks.
	n.kill9()
	n.start()
	c.waitReady("edge-1", "True", time.Minute)
	reach("after the agent restarted")
	waitFor(t, 30*time.Second, "the pods' addresses kept after the restart", func() (bool, string) {
		var got []string
		for name, ip := range ips {
			p, err := c.pod(ctx, name)
			if err != nil {
				return false, err.Error()
			}
			got = append(got, name+"="+p.Status.PodIP)
			if p.Status.PodIP != ip {
				return false, strings.Join(got, " ")
			}
		}
		return true, ""
	})

	// A pod deleted gives its namespace back.
	a, err := c.pod(ctx, "web-a")
	if err != nil {
		t.Fatal(err)
	}
	// Its endpoint leaves the node's service proxy rules within a second
	// of the delete (issue 14, "How it is checked"): the slice marks it
	// terminating at once, and the agent changes its table in place.
	rules := func() string {
		out, _ := h.Command(ctx, "nft", "list", "table", "ip", "outpost-proxy").CombinedOutput()
		return string(out)
	}
	aInRules := regexp.MustCompile(regexp.QuoteMeta(ips["web-a"]) + `\b`)
	if !aInRules.MatchString(rules()) {
		t.Fatalf("web-a's address %s is not in the proxy's rules before its delete:\n%s", ips["web-a"], rules())
	}
	deleted := time.Now()
	if _, err := c.cl.Delete(ctx, api.ResourceForKind("Pod"), "default", "web-a", nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Second, "web-a's endpoint gone from the node's proxy rules", func() (bool, string) {
		r := rules()
		return !aInRules.MatchString(r), r
	})
	t.Logf("web-a's endpoint left the node's rules %v after its delete", time.Since(deleted).Round(time.Millisecond))
	waitFor(t, time.Minute, "web-a's network namespace removed", func() (bool, string) {
		_, err := os.Stat(filepath.Join(nsDir, string(a.UID)))
		return os.IsNotExist(err), fmt.Sprint(err)
	})
	if _, err := get(ips["web-b"]); err != nil {
		t.Errorf("web-b after web-a left: %v", err)
	}
}
