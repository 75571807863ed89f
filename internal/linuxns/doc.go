// Package linuxns makes, enters and removes Linux network namespaces
// bound to files, as `ip netns` does: the pod networks of package podnet
// live in them, and tests run listeners, clients and nft inside them. Work
// done inside one runs on a thread of its own, which goes back to the Go
// runtime only once it is back in the process's namespace.
package linuxns
