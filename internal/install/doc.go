// Package install puts outpost on a host as systemd services (`outpost
// install server|agent`, `outpost uninstall`; issue 15 item 1).
//
// What it writes is plain data rendered here (Render): a unit per role
// (Type=notify with a watchdog, restarted by systemd, the agent's with
// KillMode=process so its pods outlive it), the role's flags in
// /etc/outpost/ROLE.env, and the secret (the cluster secret, or the
// agent's join string) in a file only root can read, which the unit names
// (--cluster-secret-file, or EnvironmentFile=) so that it is never on a
// command line ps shows. The units are the same for every host but for the
// path of the binary, so a package (make package) ships them rendered for
// /usr/bin/outpost and install then writes only the configuration.
//
// The Installer does the rest through two small seams, System (who runs
// it, what PID 1 is, whether a port is free) and Systemd (systemd's D-Bus
// API; the real one is package osupdate/systemd), so that its refusals and
// its idempotence are tested with fakes. Files go under Installer.Root,
// which tests point at a temporary directory.
package install
