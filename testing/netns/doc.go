// Package netns makes test hosts: network namespaces joined to the test's
// own namespace by a veth pair each, with a link the test can cut and
// restore, as a site's uplink drops. Hosts get 10.213.N.2/24 and see the
// test's side as 10.213.N.1, their default route; traffic never leaves the
// machine. It needs root and iproute2.
package netns
