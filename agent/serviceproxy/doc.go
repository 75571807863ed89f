// Package serviceproxy writes the node's packet filter rules that make
// Services reachable (SPEC NET-3), as kube-proxy's nftables mode does: one
// nftables table, replaced whole and atomically on every change, in which
// a Service's cluster IP and port (and its node ports on every local
// address) jump to a chain that picks one ready endpoint at random, or the
// one a client was sent to before under ClientIP affinity, and DNATs to
// it. A Service without endpoints is rejected at once rather than left to
// time out.
//
// The rules are computed from a plain model (Service) by Ruleset, which
// tests read; Apply hands them to nft.
package serviceproxy
