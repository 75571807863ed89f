// Package packaging holds the files that install outpost on a host:
// systemd units (systemd/) and, later, package builds. It has no Go code;
// this file exists so that the directory is a documented package.
package packaging
