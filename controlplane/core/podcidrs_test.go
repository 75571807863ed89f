package core

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

func podCIDRNode(name, cidr string) *api.Node {
	return &api.Node{TypeMeta: api.TypeMeta{Kind: "Node", APIVersion: "v1"}, ObjectMeta: api.ObjectMeta{Name: name},
		Spec: api.NodeSpec{PodCIDR: cidr}}
}

// Nodes' pod CIDRs (SPEC NET-2): each node is given the lowest free /24
// of the cluster CIDR at registration, with podCIDRs saying the same; one
// asked for must be in the cluster CIDR and free, else the write is
// refused naming spec.podCIDR; once set it stays (an update leaving it out
// keeps it, one changing it is refused); a full cluster CIDR registers
// the node without one, and its next write gives it the range a deleted
// node freed; concurrent registrations never share a range.
func TestNodePodCIDRs(t *testing.T) {
	small := startCore(t, nil, func(cfg *Config) {
		cfg.Network = Network{ClusterCIDR: netip.MustParsePrefix("10.42.0.0/23")}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	waitBootstrapped(t, ctx, small)
	get := func(c *Core, name string) *api.Node {
		t.Helper()
		obj, _, err := c.Get(nodesResource, "", name)
		if err != nil {
			t.Fatal(err)
		}
		cp, err := api.DeepCopy(obj) // the store's own is not to be changed
		if err != nil {
			t.Fatal(err)
		}
		return cp.(*api.Node)
	}
	create := func(c *Core, n *api.Node) (*api.Node, error) {
		if _, err := c.Create(ctx, ControlPlane, n); err != nil {
			return nil, err
		}
		return get(c, n.Name), nil
	}
	update := func(n *api.Node) error {
		_, err := small.Update(ctx, ControlPlane, nodesResource, "", n.Name, false, n, func() (api.Object, error) { return n, nil })
		return err
	}
	n1, err := create(small, podCIDRNode("n1", ""))
	if err != nil || n1.Spec.PodCIDR != "10.42.0.0/24" || len(n1.Spec.PodCIDRs) != 1 || n1.Spec.PodCIDRs[0] != "10.42.0.0/24" || n1.Annotations[api.AnnotationClusterCIDR] != "10.42.0.0/23" || n1.Annotations[api.AnnotationClusterDNS] != "10.43.0.10" {
		t.Fatalf("n1: %v %+v, want 10.42.0.0/24", err, n1)
	}
	refused := func(err error, what, msg string) {
		t.Helper()
		if !api.IsInvalid(err) || !strings.Contains(err.Error(), "spec.podCIDR") || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want refused naming spec.podCIDR (%s)", what, err, msg)
		}
	}
	_, err = create(small, podCIDRNode("outside", "10.99.0.0/24"))
	refused(err, "outside", "not in the cluster CIDR 10.42.0.0/23 (--cluster-cidr)")
	_, err = create(small, podCIDRNode("clash", "10.42.0.128/25"))
	refused(err, "clash", "overlaps node n1's pod CIDR 10.42.0.0/24")
	n2, err := create(small, podCIDRNode("n2", ""))
	if err != nil || n2.Spec.PodCIDR != "10.42.1.0/24" {
		t.Fatalf("n2: %v %+v, want 10.42.1.0/24", err, n2)
	}
	n3, err := create(small, podCIDRNode("n3", ""))
	if err != nil || n3.Spec.PodCIDR != "" {
		t.Fatalf("n3 with the cluster CIDR full: %v %+v, want registered without a pod CIDR", err, n3)
	}

	// Kept when left out, refused when changed.
	n1.Spec.PodCIDR, n1.Spec.PodCIDRs = "", nil
	n1.Labels = map[string]string{"x": "y"}
	if err := update(n1); err != nil {
		t.Fatal(err)
	}
	if got := get(small, "n1"); got.Spec.PodCIDR != "10.42.0.0/24" || got.Labels["x"] != "y" {
		t.Errorf("n1 after an update without its pod CIDR: %+v", got)
	}
	n1 = get(small, "n1")
	n1.Spec.PodCIDR, n1.Spec.PodCIDRs = "10.42.1.0/24", nil
	refused(update(n1), "n1 changed", "may not be changed once set (it is 10.42.0.0/24)")

	// A range freed goes to the next node written without one.
	if _, err := small.Delete(ctx, ControlPlane, nodesResource, "", "n2", api.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n3 = get(small, "n3")
	n3.Labels = map[string]string{"retry": "1"}
	if err := update(n3); err != nil {
		t.Fatal(err)
	}
	if got := get(small, "n3"); got.Spec.PodCIDR != "10.42.1.0/24" {
		t.Errorf("n3 after n2 left: pod CIDR %q, want 10.42.1.0/24", got.Spec.PodCIDR)
	}

	// Concurrent registrations (the default /16, /24 each).
	big := startCore(t, nil, nil)
	waitBootstrapped(t, ctx, big)
	var wg sync.WaitGroup
	cidrs := make([]string, 20)
	for i := range cidrs {
		wg.Go(func() {
			n, err := create(big, podCIDRNode(fmt.Sprintf("many-%d", i), ""))
			if err != nil {
				t.Error(err)
				return
			}
			cidrs[i] = n.Spec.PodCIDR
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil || p.Bits() != 24 || !netip.MustParsePrefix("10.42.0.0/16").Contains(p.Addr()) || seen[c] {
			t.Errorf("pod CIDR %q: not a /24 of 10.42.0.0/16, or given twice: %v", c, cidrs)
		}
		seen[c] = true
	}
}

// The lowest free range skips ranges an administrator gave of other
// sizes, and ends at the cluster CIDR's end.
func TestLowestFreeBlock(t *testing.T) {
	pp := netip.MustParsePrefix
	used := []taken{{pp("10.0.0.0/23"), "big"}, {pp("10.0.2.128/25"), "small"}}
	if p, ok := lowestFreeBlock(pp("10.0.0.0/22"), 24, used); !ok || p != pp("10.0.3.0/24") {
		t.Errorf("got %v %v, want 10.0.3.0/24", p, ok)
	}
	if p, ok := lowestFreeBlock(pp("10.0.0.0/23"), 24, used); ok {
		t.Errorf("got %v in a full range", p)
	}
	if p, ok := lowestFreeBlock(pp("fd00::/48"), 64, []taken{{pp("fd00::/64"), "a"}}); !ok || p != pp("fd00:0:0:1::/64") {
		t.Errorf("IPv6: got %v %v", p, ok)
	}
	if p, ok := lowestFreeBlock(pp("255.255.255.0/24"), 25, []taken{{pp("255.255.255.0/25"), "a"}, {pp("255.255.255.128/25"), "b"}}); ok {
		t.Errorf("got %v past the end of the address space", p)
	}
}
