// Package packaging holds the files that install outpost on a host:
// systemd units (systemd/, the ones the nspawn tests boot with drop-ins)
// and the .deb and .rpm build (package.sh, run by make package, and the
// packages' scripts in pkg/; their units are rendered by package
// internal/install, as `outpost install` writes them). It has no Go
// code; this file exists so that the directory is a documented package.
package packaging
