package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/testing/netns"
)

// Issue 14, "How it is checked", bullet 2, with the real CNI plugins and
// containerd (SPEC NET-2): two nodes on one link, each with its pod
// CIDR; a pod on one reaches a pod on the other at its address through
// the host-gw routes the agents keep; a node deleted takes its route
// with it.
func TestPodRoutesHostGW(t *testing.T) {
	requireReal(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	_, archive := buildDemo(t)
	root := t.TempDir()
	lan := netns.NewLAN(t)
	h1, h2 := lan.Host(t, 1), lan.Host(t, 2)
	c := startServer(t, root, lan.Gateway)
	var agents []*agentNode
	for i, h := range []*netns.Host{h1, h2} {
		name := fmt.Sprintf("edge-%d", i+1)
		nsDir := filepath.Join(root, name+"-netns")
		n := newAgent(t, name, h, filepath.Join(root, name), fmt.Sprintf("https://%s:%d", lan.Gateway, c.apiPort), c.joinString(ctx),
			"--heartbeat", "1s", "--pod-network", "cni", "--cni-conf-dir", filepath.Join(root, name+"-net.d"), "--cni-netns-dir", nsDir)
		n.shareMounts(nsDir)
		n.start()
		agents = append(agents, n)
	}
	for _, name := range []string{"edge-1", "edge-2"} {
		c.waitReady(name, "True", time.Minute)
		c.importImage(ctx, archive, name)
	}
	c.apply(ctx, "server", `apiVersion: v1
kind: Pod
metadata: {name: far, labels: {app: far}}
spec:
  nodeName: edge-2
  containers:
  - {name: web, image: `+demoImage+`, imagePullPolicy: Never, args: ["serve", "-port", "8080"], ports: [{containerPort: 8080}]}
`)
	var farIP string
	waitFor(t, 2*time.Minute, "the pod on edge-2 running", func() (bool, string) {
		p, err := c.pod(ctx, "far")
		if err != nil {
			return false, err.Error()
		}
		farIP = p.Status.PodIP
		return p.Status.Phase == "Running" && farIP != "" && farIP != h2.Addr, p.Status.Phase + " " + farIP
	})
	c.apply(ctx, "client", `apiVersion: v1
kind: Pod
metadata: {name: near}
spec:
  nodeName: edge-1
  restartPolicy: OnFailure
  containers:
  - {name: get, image: `+demoImage+`, imagePullPolicy: Never, args: ["get", "http://`+farIP+`:8080/"]}
`)
	waitFor(t, 2*time.Minute, "the pod on edge-1 reaching the pod on edge-2 with its own address", func() (bool, string) {
		p, err := c.pod(ctx, "near")
		if err != nil {
			return false, err.Error()
		}
		out, _, _ := c.cli(ctx, "logs", "near")
		// far sees near's own address: no NAT between pods.
		return p.Status.Phase == "Succeeded" && p.Status.PodIP != "" && strings.Contains(out, "on far, to "+p.Status.PodIP), p.Status.Phase + " " + p.Status.PodIP + ": " + out
	})

	// A Service in front of far (SPEC NET-3): reached at its cluster IP
	// from a pod on the other node, and at its node port on either
	// node's address from outside the cluster's hosts.
	c.apply(ctx, "service", `apiVersion: v1
kind: Service
metadata: {name: far}
spec:
  type: NodePort
  selector: {app: far}
  ports: [{port: 80, targetPort: 8080}]
`)
	svcObj, err := c.cl.Get(ctx, api.ResourceForKind("Service"), "default", "far", client.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc := svcObj.(*api.Service)
	c.apply(ctx, "via-service", `apiVersion: v1
kind: Pod
metadata: {name: via-service}
spec:
  nodeName: edge-1
  restartPolicy: OnFailure
  containers:
  - {name: get, image: `+demoImage+`, imagePullPolicy: Never, args: ["get", "http://`+svc.Spec.ClusterIP+`/"]}
`)
	waitFor(t, 2*time.Minute, "a pod on edge-1 reaching far through the Service's cluster IP", func() (bool, string) {
		p, err := c.pod(ctx, "via-service")
		if err != nil {
			return false, err.Error()
		}
		out, _, _ := c.cli(ctx, "logs", "via-service")
		return p.Status.Phase == "Succeeded" && strings.Contains(out, "on far"), p.Status.Phase + ": " + out
	})
	for _, h := range []*netns.Host{h2, h1} {
		url := fmt.Sprintf("http://%s:%d/", h.Addr, svc.Spec.Ports[0].NodePort)
		waitFor(t, 30*time.Second, "far at the node port "+url, func() (bool, string) {
			cl := &http.Client{Timeout: 3 * time.Second}
			resp, err := cl.Get(url)
			if err != nil {
				return false, err.Error()
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return strings.Contains(string(b), "on far"), string(b)
		})
	}

	// edge-2 deleted: edge-1's route to its pods goes.
	n2, err := c.node(ctx, "edge-2")
	if err != nil {
		t.Fatal(err)
	}
	routes := func() string {
		out, _ := exec.Command("ip", "-n", h1.Name, "route", "show", "proto", "79").CombinedOutput()
		return string(out)
	}
	if r := routes(); !strings.Contains(r, n2.Spec.PodCIDR+" via "+h2.Addr) {
		t.Fatalf("edge-1's routes %q lack edge-2's pod CIDR %s via %s", r, n2.Spec.PodCIDR, h2.Addr)
	}
	agents[1].kill9()
	c.mustCLI(ctx, "delete", "node", "edge-2")
	waitFor(t, time.Minute, "edge-1's route to edge-2's pods gone", func() (bool, string) {
		r := routes()
		return !strings.Contains(r, n2.Spec.PodCIDR), r
	})
}
