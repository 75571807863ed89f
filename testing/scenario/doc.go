// Package scenario holds end-to-end tests of the control plane's behaviour
// as users meet it: in-process clusters of real servers (raft, store, API,
// the leader's schedulers and controllers) driven through the Go client,
// with Node objects created directly instead of agents. Each test names
// the SPEC items it checks.
package scenario
