package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/agent/podnet"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/internal/linuxns"
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
	agents, _ := startPodNodes(ctx, c, root, lan.Gateway, archive, []*netns.Host{h1, h2})
	c.podReachesPod(ctx)

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
	c.waitSucceededSaying(ctx, "via-service", "a pod on edge-1 reaching far through the Service's cluster IP", func(*api.Pod) string { return "on far" })
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

// Issue 14 (SPEC NET-2), the vxlan mode, with the real CNI plugins and
// containerd: two nodes on subnets of their own behind a router that
// knows nothing of the pod CIDRs, where host-gw's routes cannot be made
// (neither node's address is on a link of the other's). A pod on one
// reaches a pod on the other at its address, which sees the caller's own
// (no NAT), through the VXLAN device the agents keep; pods' links have
// the overlay's MTU, and megabytes pass both ways in packets that fill
// it; a node deleted takes its route, neighbor and forwarding entries on
// the other with it.
func TestPodRoutesVXLAN(t *testing.T) {
	requireReal(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	_, archive := buildDemo(t)
	root := t.TempDir()
	wan := netns.NewRouted(t)
	h1, h2 := wan.Host(t, 1), wan.Host(t, 2)
	if out, err := exec.Command("ip", "-n", h1.Name, "-o", "route", "get", h2.Addr).CombinedOutput(); err != nil || !strings.Contains(string(out), "via "+h1.Gateway) {
		t.Fatalf("edge-1 to edge-2: %s %v, want through the router %s", out, err, h1.Gateway)
	}
	c := startServer(t, root, wan.Gateway)
	agents, nsDirs := startPodNodes(ctx, c, root, wan.Gateway, archive, []*netns.Host{h1, h2}, "--pod-routes", "vxlan")
	// idle is a pod on edge-1 whose namespace the test's own sockets use.
	c.apply(ctx, "idle", `apiVersion: v1
kind: Pod
metadata: {name: idle}
spec:
  nodeName: edge-1
  containers:
  - {name: tick, image: `+demoImage+`, imagePullPolicy: Never, args: ["tick", "-every", "1h"]}
`)
	far := c.podReachesPod(ctx)
	farIP := far.Status.PodIP
	var idle *api.Pod
	waitFor(t, 2*time.Minute, "idle running on edge-1", func() (bool, string) {
		p, err := c.pod(ctx, "idle")
		if err != nil {
			return false, err.Error()
		}
		idle = p
		return p.Status.Phase == "Running" && p.Status.PodIP != "", p.Status.Phase
	})

	// The pods' links have the VXLAN device's MTU (the hosts' links'
	// 1500 less 50): a pod's full packet fits the overlay once wrapped.
	farNS := filepath.Join(nsDirs[1], string(far.UID))
	idleNS := filepath.Join(nsDirs[0], string(idle.UID))
	for _, ns := range []string{farNS, idleNS} {
		var mtu int
		if err := linuxns.Run(ns, func() error {
			i, err := net.InterfaceByName("eth0")
			if err == nil {
				mtu = i.MTU
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if mtu != 1450 {
			t.Errorf("eth0 of the pod at %s has MTU %d, want 1450", ns, mtu)
		}
	}
	data := make([]byte, 4<<20)
	_, _ = rand.Read(data)
	// A datagram that fills a 1500-byte link arrives the first time: a
	// pod sends it in fragments of its link's MTU, never as one packet
	// the node would drop for the overlay's (with only an ICMP error
	// back, after which a retry would be fragmented).
	var udp net.PacketConn
	if err := linuxns.Run(farNS, func() (err error) { udp, err = net.ListenPacket("udp", ":9001"); return err }); err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	var out net.Conn
	if err := linuxns.Run(idleNS, func() (err error) { out, err = net.Dial("udp", farIP+":9001"); return err }); err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := out.Write(data[:1472]); err != nil {
		t.Fatalf("a datagram of 1472 bytes from idle: %v", err)
	}
	_ = udp.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	if n, _, err := udp.ReadFrom(buf); err != nil || !bytes.Equal(buf[:n], data[:1472]) {
		t.Fatalf("far got %d bytes of the datagram of 1472: %v", n, err)
	}

	// 4 MiB from idle to far and back, over a connection in the pods'
	// namespaces.
	var ln net.Listener
	if err := linuxns.Run(farNS, func() (err error) { ln, err = net.Listen("tcp", ":9000"); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = io.Copy(conn, conn)
	}()
	var conn net.Conn
	if err := linuxns.Run(idleNS, func() (err error) { conn, err = net.DialTimeout("tcp", farIP+":9000", 5*time.Second); return err }); err != nil {
		t.Fatalf("idle to far: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	go func() {
		_, _ = conn.Write(data)
		_ = conn.(*net.TCPConn).CloseWrite()
	}()
	start := time.Now()
	if back, err := io.ReadAll(conn); err != nil || !bytes.Equal(back, data) {
		t.Fatalf("4 MiB echoed by far: %d bytes back, equal %v, err %v", len(back), bytes.Equal(back, data), err)
	}
	t.Logf("4 MiB each way between the pods in %v", time.Since(start))

	// edge-2 deleted: edge-1's route, neighbor and forwarding entries of
	// it go.
	n2, err := c.node(ctx, "edge-2")
	if err != nil {
		t.Fatal(err)
	}
	cidr := netip.MustParsePrefix(n2.Spec.PodCIDR)
	vtep, mac := cidr.Masked().Addr().String(), podnet.VTEPMAC(cidr).String()
	entries := func() string {
		var b strings.Builder
		for _, args := range [][]string{
			{"ip", "-n", h1.Name, "route", "show", "proto", "79"},
			{"ip", "-n", h1.Name, "neigh", "show", "dev", podnet.VXLANDevice},
			{"bridge", "-n", h1.Name, "fdb", "show", "dev", podnet.VXLANDevice},
		} {
			out, _ := exec.Command(args[0], args[1:]...).CombinedOutput()
			b.Write(out)
		}
		return b.String()
	}
	e := entries()
	for _, want := range []string{
		n2.Spec.PodCIDR + " via " + vtep + " dev " + podnet.VXLANDevice + " onlink",
		vtep + " lladdr " + mac + " PERMANENT",
		mac + " dst " + h2.Addr + " self permanent",
	} {
		if !strings.Contains(e, want) {
			t.Fatalf("edge-1's entries lack %q:\n%s", want, e)
		}
	}
	agents[1].kill9()
	c.mustCLI(ctx, "delete", "node", "edge-2")
	waitFor(t, time.Minute, "edge-1's route, neighbor and forwarding entries of edge-2 gone", func() (bool, string) {
		e := entries()
		return !strings.Contains(e, n2.Spec.PodCIDR) && !strings.Contains(e, mac) && !strings.Contains(e, h2.Addr), e
	})
}

// startPodNodes starts agents edge-1, edge-2, ... on hosts, each with a
// pod network of its own (extra: more flags), reaching the server at
// serverAddr; it waits until they are Ready with the demo image. nsDirs
// are where their pods' namespaces are bound, seen from the test.
func startPodNodes(ctx context.Context, c *testCluster, root, serverAddr, archive string, hosts []*netns.Host, extra ...string) (agents []*agentNode, nsDirs []string) {
	c.t.Helper()
	for i, h := range hosts {
		name := fmt.Sprintf("edge-%d", i+1)
		nsDir := filepath.Join(root, name+"-netns")
		n := newAgent(c.t, name, h, filepath.Join(root, name), fmt.Sprintf("https://%s:%d", serverAddr, c.apiPort), c.joinString(ctx),
			append([]string{"--heartbeat", "1s", "--pod-network", "cni", "--cni-conf-dir", filepath.Join(root, name+"-net.d"), "--cni-netns-dir", nsDir}, extra...)...)
		n.shareMounts(nsDir)
		n.start()
		agents, nsDirs = append(agents, n), append(nsDirs, nsDir)
	}
	for _, n := range agents {
		c.waitReady(n.name, "True", time.Minute)
		c.importImage(ctx, archive, n.name)
	}
	return agents, nsDirs
}

// podReachesPod runs far (serving HTTP, label app=far) on edge-2 and near
// (a GET of far's pod IP) on edge-1, and waits until near has far's
// answer naming near's own address as the caller's: no NAT between
// pods. It returns far as it runs.
func (c *testCluster) podReachesPod(ctx context.Context) *api.Pod {
	t := c.t
	t.Helper()
	c.apply(ctx, "far", `apiVersion: v1
kind: Pod
metadata: {name: far, labels: {app: far}}
spec:
  nodeName: edge-2
  containers:
  - {name: web, image: `+demoImage+`, imagePullPolicy: Never, args: ["serve", "-port", "8080"], ports: [{containerPort: 8080}]}
`)
	var far *api.Pod
	waitFor(t, 2*time.Minute, "the pod on edge-2 running with an address of its own", func() (bool, string) {
		p, err := c.pod(ctx, "far")
		if err != nil {
			return false, err.Error()
		}
		far = p
		return p.Status.Phase == "Running" && p.Status.PodIP != "" && p.Status.PodIP != p.Status.HostIP, p.Status.Phase + " " + p.Status.PodIP
	})
	c.apply(ctx, "near", `apiVersion: v1
kind: Pod
metadata: {name: near}
spec:
  nodeName: edge-1
  restartPolicy: OnFailure
  containers:
  - {name: get, image: `+demoImage+`, imagePullPolicy: Never, args: ["get", "http://`+far.Status.PodIP+`:8080/"]}
`)
	// Said with the caller's own address (no NAT between pods), the
	// line's end included: an address not yet known matches nothing.
	c.waitSucceededSaying(ctx, "near", "the pod on edge-1 reaching the pod on edge-2 with its own address", func(p *api.Pod) string {
		return "on far, to " + p.Status.PodIP + "\n"
	})
	return far
}
