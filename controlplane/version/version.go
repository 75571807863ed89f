// Package version holds the build's version, set by the linker
// (-X github.com/outpost-edge/outpost/controlplane/version.Version=...).
package version

// Version is the release this binary was built from; "dev" for local builds.
var Version = "dev"
