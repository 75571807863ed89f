// Package pki holds the cluster certificate authority and the TLS settings
// built on it.
//
// The CA is not stored or exchanged: every server derives the same CA key
// and the same, byte-identical CA certificate from the cluster secret, so
// servers started together (bootstrap-expect) speak mutual TLS before any of
// them has talked to another. That makes the cluster secret the root of
// trust: whoever holds it can mint server certificates. Certificates issued
// by the CA (server and client leaves) use fresh random keys and serials.
//
// Three trust decisions live here so the transport code does not have to
// repeat them: the API server verifies client certificates only when given
// (bearer tokens are the main credential); raft peers must present a
// certificate of the cluster CA with the organizational unit
// "outpost-server"; and clients that know only a pin (the "sha256:..."
// hash of the CA public key, as carried in a join string) accept a server
// whose chain contains a CA with that key.
package pki
