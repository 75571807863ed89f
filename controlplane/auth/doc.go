// Package auth decides who a request comes from and what it may do.
//
// Authentication is by bearer token "<id>.<secret>" (the shape of kubeadm's
// bootstrap tokens, so users recognise it). The store keeps api.Token
// objects named by the id and holding only the SHA-256 of the secret; the
// Authenticator checks a presented token against them and caches the
// result, so the per-request cost is a map lookup. Servers and agents may
// instead present a client certificate of the cluster CA; IdentityFromCert
// maps it to the same Identity.
//
// Authorization is a fixed set of rules per role (cluster-admin, server,
// developer, node), not a policy language: an edge cluster has few users
// and the rules are easier to audit as code. Authorize and Can are pure
// functions of the identity and the request, plus a lookup of which node a
// pod is bound to for the node rules.
package auth
