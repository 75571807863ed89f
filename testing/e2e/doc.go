// Package e2e holds tests that drive real `outpost` processes: crash safety
// under SIGKILL, the CLI against a live server, and node agents in network
// namespaces, each with its own containerd, whose links the tests cut
// (agent_test.go; root, containerd and runc, or OUTPOST_TEST_REAL=1 makes
// their absence a failure).
package e2e
