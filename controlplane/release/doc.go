// Package release holds outpost's release payload (SPEC UPD-3, UPD-4):
// one content-addressed artifact in the OCI image layout, so that
// registries and OCI tools carry it as they are, made of the release's
// metadata (OpenShift's release-metadata: version, the versions it
// updates from, a URL), its manifests named 0000_<runlevel>_<component>_<name>.yaml,
// its image references (OpenShift's image-references ImageStream: the
// add-ons' images and the pools' OS images pinned by digest) and the
// outpost binary per architecture.
//
// A payload is signed over its manifest's bytes, whose digest names the
// release, with a key a site already knows how to use: an ECDSA P-256 or
// Ed25519 key in PEM, the signature being what `cosign sign-blob` or
// `openssl dgst -sha256 -sign` print for the manifest file. Stdlib
// cryptography verifies both; no private format and no new dependency.
// The signature travels in the layout as an OCI 1.1 referrer of the
// release manifest. Open checks every blob's digest and size; Verify
// checks a signature by one of the cluster's trusted keys.
package release
