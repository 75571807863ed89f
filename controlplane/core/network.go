package core

import (
	"fmt"
	"net/netip"
)

// Network is the cluster's address ranges (SPEC NET-2, NET-3): where
// Services' cluster IPs and node ports come from, and the pods' range,
// split into one pod CIDR per node.
type Network struct {
	ServiceCIDR netip.Prefix
	NodePorts   [2]int32
	ClusterCIDR netip.Prefix
	// NodeCIDRMaskSize is the prefix length of a node's pod CIDR.
	NodeCIDRMaskSize int
	// ClusterDNS is the address every agent's resolver answers on (SPEC
	// NET-4), reserved out of the service CIDR: the tenth address, as
	// k3s's.
	ClusterDNS netip.Addr
}

// Defaults of the network, as k3s's.
var (
	DefaultServiceCIDR      = netip.MustParsePrefix("10.43.0.0/16")
	DefaultNodePortRange    = [2]int32{30000, 32767}
	DefaultClusterCIDR      = netip.MustParsePrefix("10.42.0.0/16")
	DefaultNodeCIDRMaskSize = 24
)

// WithDefaults fills in what n leaves out.
func (n Network) WithDefaults() Network {
	if !n.ServiceCIDR.IsValid() {
		n.ServiceCIDR = DefaultServiceCIDR
	}
	if n.NodePorts == [2]int32{} {
		n.NodePorts = DefaultNodePortRange
	}
	if !n.ClusterCIDR.IsValid() {
		n.ClusterCIDR = DefaultClusterCIDR
	}
	if n.NodeCIDRMaskSize == 0 {
		n.NodeCIDRMaskSize = DefaultNodeCIDRMaskSize
	}
	n.ServiceCIDR, n.ClusterCIDR = n.ServiceCIDR.Masked(), n.ClusterCIDR.Masked()
	if !n.ClusterDNS.IsValid() {
		n.ClusterDNS = n.ServiceCIDR.Addr()
		for range 10 {
			n.ClusterDNS = n.ClusterDNS.Next()
		}
	}
	return n
}

// Check says what is wrong with n (defaults filled in), naming the
// server's flags.
func (n Network) Check() error {
	if n.ClusterCIDR.Overlaps(n.ServiceCIDR) {
		return fmt.Errorf("the cluster CIDR %s (--cluster-cidr) overlaps the service CIDR %s (--service-cidr): pods and Services need ranges of their own", n.ClusterCIDR, n.ServiceCIDR)
	}
	if !n.ServiceCIDR.Contains(n.ClusterDNS) {
		return fmt.Errorf("the cluster DNS address %s (--cluster-dns) is not in the service CIDR %s (--service-cidr)", n.ClusterDNS, n.ServiceCIDR)
	}
	if p := n.NodePorts; p[0] < 1 || p[1] > 65535 || p[0] > p[1] {
		return fmt.Errorf("the node port range %d-%d (--service-node-port-range): want LOW-HIGH within 1-65535", p[0], p[1])
	}
	// A node's range holds at least two pods, and the cluster's at least
	// one node.
	if most := n.ClusterCIDR.Addr().BitLen() - 2; n.NodeCIDRMaskSize < n.ClusterCIDR.Bits() || n.NodeCIDRMaskSize > most {
		return fmt.Errorf("a node's pod CIDR of /%d (--node-cidr-mask-size) does not fit the cluster CIDR %s (--cluster-cidr): want /%d to /%d",
			n.NodeCIDRMaskSize, n.ClusterCIDR, n.ClusterCIDR.Bits(), most)
	}
	return nil
}
