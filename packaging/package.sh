#!/bin/bash
# package.sh BIN OUTDIR VERSION builds outpost's .deb and .rpm (make
# package) with nfpm, run from the Go module proxy as a tool so that its
# dependencies stay out of go.mod. The packages hold the binary, the
# systemd units as "outpost install" would write them for /usr/bin/outpost
# (so that it then writes only the configuration), shell completions and,
# when the binary has "outpost man", man pages; their scripts start
# nothing (packaging/pkg).
set -euo pipefail
bin=$1 out=$2 version=$3
here=$(cd "$(dirname "$0")" && pwd)
NFPM=${NFPM:-github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2}
arch=${ARCH:-$(go env GOARCH)}
# Debian and RPM versions start with a digit and have no '-' (git
# describe's "v1.2-3-gabc" becomes "1.2~3~gabc", a bare hash 0.0.0~git...).
v=${version#v}
v=${v//-/\~}
[[ $v =~ ^[0-9] ]] || v="0.0.0~git$v"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
install -m 0755 "$bin" "$stage/outpost"
"$bin" install unit-files "$stage/units"
mkdir -p "$stage/completions"
"$bin" completion bash >"$stage/completions/outpost"
"$bin" completion zsh >"$stage/completions/_outpost"
"$bin" completion fish >"$stage/completions/outpost.fish"
man=""
if "$bin" man --help >/dev/null 2>&1; then
	mkdir -p "$stage/man"
	"$bin" man "$stage/man"
	gzip -9n "$stage"/man/*.[1-9]
	man="  - src: $stage/man/*.gz
    dst: /usr/share/man/man1/"
fi

cat >"$stage/nfpm.yaml" <<YAML
name: outpost
arch: $arch
platform: linux
version: "$v"
version_schema: none
section: admin
priority: optional
maintainer: outpost <outpost@users.noreply.github.com>
description: |
  Small Kubernetes-shaped clusters for the edge, in one binary.
  "outpost install server" or "outpost install agent" sets a host up as a
  systemd service; the package itself starts nothing.
homepage: https://github.com/outpost-edge/outpost
recommends: [containerd, runc, crun]
contents:
  - src: $stage/outpost
    dst: /usr/bin/outpost
    file_info: {mode: 0755}
  - src: $stage/units/outpost-server.service
    dst: /usr/lib/systemd/system/outpost-server.service
  - src: $stage/units/outpost-agent.service
    dst: /usr/lib/systemd/system/outpost-agent.service
  - src: $stage/completions/outpost
    dst: /usr/share/bash-completion/completions/outpost
  - src: $stage/completions/_outpost
    dst: /usr/share/zsh/vendor-completions/_outpost
    packager: deb
  - src: $stage/completions/_outpost
    dst: /usr/share/zsh/site-functions/_outpost
    packager: rpm
  - src: $stage/completions/outpost.fish
    dst: /usr/share/fish/vendor_completions.d/outpost.fish
$man
scripts:
  postinstall: $here/pkg/postinst.sh
  preremove: $here/pkg/prerm.sh
  postremove: $here/pkg/postrm.sh
YAML

mkdir -p "$out"
for p in deb rpm; do
	GOFLAGS= go run "$NFPM" pkg --config "$stage/nfpm.yaml" --packager "$p" --target "$out/"
done
