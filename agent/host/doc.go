// Package host reads the facts and health of the machine a node agent runs
// on: capacity and allocatable resources, node info and addresses (Facts),
// the pressure signals of memory, disks, process ids and the network
// (Observe), and the node conditions the agent reports from them
// (Conditions), judged against eviction thresholds written as the kubelet
// writes them (ParseThresholds, DefaultThresholds).
//
// Every access to the operating system goes through osEnv, a struct of
// functions pulled out for testing, so the decisions are table-tested on
// recorded /proc, /sys and statfs inputs without root. The real
// environment is Linux only (host_linux.go); elsewhere Facts and Observe
// return errors.ErrUnsupported.
//
// Observe runs every few seconds on every node, so it reads a handful of
// small files into a pooled buffer and parses them without building
// strings for every line.
package host
