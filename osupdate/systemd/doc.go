// Package systemd is the real osupdate.Systemd: the host's systemd and
// logind, spoken to over the system D-Bus through go-systemd and godbus.
//
// It is a thin adapter on purpose. What to enable, mask or reboot, and
// when, is decided in package osupdate from plain data and tested there
// with a fake; this package only turns each request into the D-Bus calls
// systemctl would make (EnableUnitFiles and a Reload for `systemctl
// enable`, say), so that what it needs testing for is whether real
// systemd does what the calls ask. Its tests check exactly that, against
// systemd booted in a systemd-nspawn container (testing/nspawn), by
// running the test binary again inside it.
//
// Reboot is the one place with a little logic of its own: it waits, for a
// bounded time, while a logind "block" inhibitor lock for shutdown is held
// (an administrator's or a package manager's: a reboot now would hurt),
// then asks logind to reboot; where there is no logind (minimal hosts,
// containers without it) it asks systemd's manager to start reboot.target,
// and as a last resort runs `systemctl reboot`.
package systemd
