// Package admission holds the admission contract of the API server (the
// operations, Interface and Scope) and the admission plugins an
// administrator configures in the server's config file: PodNodeConstraints
// (the nodeSelector half of SPEC ADM-1) and PodNodeSelector (SPEC ADM-2).
//
// The contract lives here rather than in the server so that plugins can be
// written, configured and tested without the HTTP server, and so that the
// server imports its plugins and not the other way round. The rules no
// configuration may leave out (ADM-1's spec.nodeName rule, NodeRestriction)
// stay built into the server; this package holds only what the config file
// switches on, in the shape of the seed's master-config.yaml
// (admissionConfig.pluginConfig.<Plugin>.configuration), so an OpenShift
// administrator's file works as it is.
package admission
