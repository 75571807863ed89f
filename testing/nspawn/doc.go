// Package nspawn boots test hosts that are whole machines as far as
// systemd is concerned: a Debian root filesystem with systemd as PID 1,
// run by systemd-nspawn, which reboots (`systemctl reboot` inside) into a
// new boot of the same filesystem and powers off like a machine. Tests of
// node OS updates run `outpost agent` as a unit inside and watch it
// reboot its host.
//
// The base root filesystem is built once per machine by debootstrap into
// CacheDir (Rootfs); each host gets an overlay over it, so a host costs a
// directory, not a copy. A host can run in a network namespace from
// testing/netns, have files of this machine bound in, files written and
// units enabled before its first boot. Commands run inside through
// nsenter (Run); the test waits for a boot with WaitRunning and WaitBoot.
//
// It is made for machines whose PID 1 is not systemd and whose cgroups
// are v1 (with a cgroup2 hierarchy beside, "hybrid"): there is no
// systemd-machined (so no machinectl, and nspawn runs --register=no) and
// no systemd to make a scope unit for each container (so --keep-unit,
// with the harness making each host's cgroup itself). systemd-nspawn
// exits with status 133 when the host reboots, and the harness starts it
// again; the kernel's boot ID stays the same across such a reboot, so a
// new boot shows as a fresh /run inside (a tmpfs each boot) and as Boots.
//
// Hosts get every capability (--capability=all). containerd and runc, as
// the agent runs them, were tried inside a host by hand (binaries of this
// machine bound in): containerd starts and imports images as is, but a
// container only started with three more things, which a test running
// the agent inside must arrange:
//   - keyrings: nspawn's seccomp filter refuses keyctl, and runc needs a
//     session keyring; pass --system-call-filter=@keyring in Args;
//   - writable cgroup controllers: nspawn mounts the v1 controllers
//     read-only inside (only name=systemd and the cgroup2 hierarchy are
//     writable; SYSTEMD_NSPAWN_API_VFS_WRITABLE=1 does not change that,
//     neither do --bind= of them or a remount), so a unit inside must
//     unmount each and mount it afresh (mount -t cgroup -o memory ...).
//     Inside the host's cgroup namespace those controllers are rooted at
//     this machine's own cgroup (nspawn makes a cgroup of its own only in
//     name=systemd and cgroup2), so what runc makes there ("default/ID")
//     is not below the host's cgroup and is not removed by Close;
//   - containerd's overlayfs snapshots cannot have the host's root, an
//     overlay, as their upper layer: bind a plain directory of this
//     machine at /var/lib/containerd.
//
// Devices a container needs beyond nspawn's (/dev/fuse, /dev/net/tun)
// must be bound in with --bind=: --property=DeviceAllow= needs systemd on
// this machine.
//
// It needs root, systemd-nspawn (systemd-container), debootstrap, nsenter
// and unshare; Require skips or, with OUTPOST_TEST_REAL=1, fails a test
// on a machine without them.
package nspawn
