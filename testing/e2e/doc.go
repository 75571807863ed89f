// Package e2e holds tests that drive real `outpost` processes: crash safety
// under SIGKILL, and the CLI against a live server.
package e2e
