// Package clusterdns is the cluster's DNS as each agent answers it for
// its own pods (SPEC NET-4): Services as NAME.NAMESPACE.svc.DOMAIN (their
// cluster IP, a headless Service's ready endpoints, an ExternalName's
// CNAME), their named ports as SRV records, pods as
// A-B-C-D.NAMESPACE.pod.DOMAIN, and every other name forwarded to the
// node's own resolvers. It also writes the resolv.conf each pod gets for
// its dnsPolicy.
//
// Every agent answers on one address the control plane reserves out of
// the service CIDR (10.43.0.10 by default), put on the node's loopback
// link: a pod asks its own node, so a lookup needs no other host and
// keeps working while the node is cut off from the rest of the cluster.
package clusterdns
