// Package cgroupstest writes cgroup and /proc trees for tests of code that
// reads them through cgroups.FS.
package cgroupstest
