// Package osupdate applies a node's MachineConfig (SPEC UPD-8) on its
// host: the agent's half of a pool's rolling update. For a node whose
// desiredConfig differs from its currentConfig it cordons the node, drains
// it through the eviction API, writes the config's files (keeping what
// they replace) and units, stages kernel arguments and the OS image with
// a Backend, reboots through systemd, and after the boot checks that what
// runs is what was asked and that the host is healthy; then it uncordons
// and reports Done, or restores the previous files, units and OS, reboots
// back and reports Degraded with the reason.
//
// Every step is recorded in a Journal before it acts, so an agent killed
// or a host that loses power at any point converges when it comes back,
// with at most one reboot more. Decisions take plain data and are tested
// with fakes; systemd (D-Bus) and the backends' commands are thin
// adapters behind the Systemd and Backend interfaces.
package osupdate
