// Package ociarchive writes and reads tiny OCI image layout archives in
// pure Go: one image, one gzip layer built from in-memory files, a config
// with entrypoint, cmd and env, and an index.json that names the image both
// with org.opencontainers.image.ref.name and io.containerd.image.name, so
// `ctr images import` and containerd's client Import give it its name.
//
// It exists so that outpost can ship and test images without a registry or
// a docker daemon: the tests pack a static Go binary into an image, and the
// demo image is built the same way. Read is the inverse of Build, for the
// fake runtime, which has no content store of its own; it understands the
// OCI layout only (not docker save archives).
package ociarchive
