// Package logwriterbin carries the small log writer binary that
// containerd's shims run beside each container (packaging/logwriter),
// embedded into outpost by `make build`, and installs it where the shims
// can run it. A build without it (plain `go build`) embeds none, and the
// agent then uses outpost's own executable, which costs more memory per
// container.
package logwriterbin
