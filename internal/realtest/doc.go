// Package realtest decides what a test of a real part (root, containerd,
// the CNI plugins, nft, network namespaces, systemd-nspawn) does when the
// machine lacks what it needs: with OUTPOST_TEST_REAL=1, which `make
// test` sets, it fails, so nothing real is skipped in CI; otherwise it
// skips, saying what is missing.
package realtest
