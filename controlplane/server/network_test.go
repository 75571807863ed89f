package server

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/core"
)

// The cluster's ranges (SPEC NET-3): a pod range overlapping the service
// range, or a node port range out of bounds, stops the server at start
// naming the flags; the defaults are k3s's.
func TestNetworkRanges(t *testing.T) {
	c, err := Config{DataDir: "d", ID: "s1"}.withDefaults()
	n := c.Network
	if err != nil || n.ClusterCIDR.String() != "10.42.0.0/16" || n.ServiceCIDR.String() != "10.43.0.0/16" || n.NodePorts != [2]int32{30000, 32767} || n.NodeCIDRMaskSize != 24 || n.ClusterDNS.String() != "10.43.0.10" {
		t.Fatalf("defaults: %v %+v", err, n)
	}
	_, err = Config{DataDir: "d", ID: "s1", Network: core.Network{ClusterCIDR: netip.MustParsePrefix("10.0.0.0/8")}}.withDefaults()
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--cluster-cidr") || !strings.Contains(err.Error(), "--service-cidr") {
		t.Errorf("overlapping ranges: %v", err)
	}
	_, err = Config{DataDir: "d", ID: "s1", Network: core.Network{NodePorts: [2]int32{40000, 30000}}}.withDefaults()
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--service-node-port-range") {
		t.Errorf("a reversed node port range: %v", err)
	}
	_, err = Config{DataDir: "d", ID: "s1", Network: core.Network{ClusterDNS: netip.MustParseAddr("10.42.0.10")}}.withDefaults()
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--cluster-dns") {
		t.Errorf("a cluster DNS address outside the service CIDR: %v", err)
	}
	for _, mask := range []int{8, 33} {
		_, err = Config{DataDir: "d", ID: "s1", Network: core.Network{NodeCIDRMaskSize: mask}}.withDefaults()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "--node-cidr-mask-size") {
			t.Errorf("node mask /%d in a /16: %v", mask, err)
		}
	}
}
