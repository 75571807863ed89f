package clusterdns

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// ResolvConf is what a resolv.conf says, as far as pods' resolvers read
// it.
type ResolvConf struct {
	Nameservers []string
	Searches    []string
	Options     []string // "ndots:5", "edns0"
}

// resolv.conf's limits, as the kubelet keeps them: glibc reads three
// nameservers and, since 2.26, any number of search domains, of which
// Kubernetes passes 32.
const (
	maxNameservers = 3
	maxSearches    = 32
)

// ParseResolvConf reads the nameservers, search domains and options of a
// resolv.conf; a missing file is an empty one.
func ParseResolvConf(path string) (ResolvConf, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return ResolvConf{}, nil
	}
	if err != nil {
		return ResolvConf{}, fmt.Errorf("clusterdns: %w", err)
	}
	var rc ResolvConf
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(f) > 1 {
				rc.Nameservers = append(rc.Nameservers, f[1])
			}
		case "search", "domain":
			// The last of search and domain wins, as in glibc.
			rc.Searches = slices.Clone(f[1:])
		case "options":
			rc.Options = append(rc.Options, f[1:]...)
		}
	}
	return rc, nil
}

// HostResolvConf is the resolv.conf the node's processes use, or, when
// that only names a local stub (systemd-resolved's 127.0.0.53, which a
// pod in its own network cannot reach), the one behind it.
func HostResolvConf() string {
	const etc, resolved = "/etc/resolv.conf", "/run/systemd/resolve/resolv.conf"
	rc, err := ParseResolvConf(etc)
	if err != nil || len(rc.Nameservers) == 0 {
		return etc
	}
	for _, ns := range rc.Nameservers {
		if ip, err := netip.ParseAddr(ns); err != nil || !ip.IsLoopback() {
			return etc
		}
	}
	if _, err := os.Stat(resolved); err == nil {
		return resolved
	}
	return etc
}

// Bytes is rc as a resolv.conf file.
func (rc ResolvConf) Bytes() []byte {
	var b bytes.Buffer
	if len(rc.Searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(rc.Searches, " "))
	}
	for _, ns := range rc.Nameservers {
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	if len(rc.Options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(rc.Options, " "))
	}
	return b.Bytes()
}

// PodDNS is what a pod's resolv.conf is made from on a node.
type PodDNS struct {
	// Host is the node's resolv.conf (dnsPolicy Default).
	Host ResolvConf
	// ClusterDNS is the cluster resolver's address; invalid: the node
	// has none, and ClusterFirst pods get the node's resolv.conf.
	ClusterDNS netip.Addr
	Domain     string // "cluster.local"
}

// For is the resolv.conf of pod: its DNS policy's, with its dnsConfig
// added (SPEC NET-4, Kubernetes' rules).
func (d PodDNS) For(pod *api.Pod) ResolvConf {
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = api.DNSClusterFirst
	}
	if policy == api.DNSClusterFirst && pod.Spec.HostNetwork {
		// A hostNetwork pod asks what its node asks, unless it says
		// ClusterFirstWithHostNet.
		policy = api.DNSDefault
	}
	if (policy == api.DNSClusterFirst || policy == api.DNSClusterFirstWithHostNet) && !d.ClusterDNS.IsValid() {
		policy = api.DNSDefault
	}
	var rc ResolvConf
	switch policy {
	case api.DNSClusterFirst, api.DNSClusterFirstWithHostNet:
		rc.Nameservers = []string{d.ClusterDNS.String()}
		rc.Searches = append([]string{pod.Namespace + ".svc." + d.Domain, "svc." + d.Domain, d.Domain}, d.Host.Searches...)
		// ndots:5: a name of up to four dots (web.default.svc) is
		// tried with the search domains first, as in Kubernetes.
		rc.Options = []string{"ndots:5"}
	case api.DNSDefault:
		rc = ResolvConf{Nameservers: slices.Clone(d.Host.Nameservers), Searches: slices.Clone(d.Host.Searches), Options: slices.Clone(d.Host.Options)}
	}
	if c := pod.Spec.DNSConfig; c != nil {
		rc.Nameservers = append(rc.Nameservers, c.Nameservers...)
		rc.Searches = append(rc.Searches, c.Searches...)
		for _, o := range c.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			// An option of the pod's replaces the policy's of its name.
			rc.Options = slices.DeleteFunc(rc.Options, func(have string) bool {
				name, _, _ := strings.Cut(have, ":")
				return name == o.Name
			})
			rc.Options = append(rc.Options, opt)
		}
	}
	rc.Nameservers = dedupe(rc.Nameservers)
	if len(rc.Nameservers) > maxNameservers {
		rc.Nameservers = rc.Nameservers[:maxNameservers]
	}
	rc.Searches = dedupe(rc.Searches)
	if len(rc.Searches) > maxSearches {
		rc.Searches = rc.Searches[:maxSearches]
	}
	return rc
}

// dedupe keeps the first of each value, in order.
func dedupe(in []string) []string {
	seen := make(map[string]bool, len(in))
	return slices.DeleteFunc(in, func(s string) bool {
		if seen[s] {
			return true
		}
		seen[s] = true
		return false
	})
}
