// Package endpointtest holds a small in-memory runtime.Runtime for tests
// of the agent's endpoint and of the API server's streams through it:
// containers with scripted logs and exits, a few exec commands, and
// image imports that keep the bytes they were sent. Only the methods the
// endpoint calls do anything; the others return errors.ErrUnsupported.
package endpointtest
