package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/internal/realtest"
)

// ErrNotRoot is a test host asked for without the privileges to make one.
var ErrNotRoot = errors.New("network namespaces need root and iproute2 (ip)")

// Host is one test host: a network namespace with one uplink.
type Host struct {
	// Name is the namespace's name, for `ip netns exec`.
	Name string
	// Addr is the host's address; Gateway the test side's address of its
	// link, which the host reaches the test's servers through.
	Addr, Gateway string
	// rootIf is the test side's end of the veth pair: in the test's own
	// namespace, or in linkNS (a Routed host's, the router's).
	rootIf string
	linkNS string
	n      int
}

// onLink is the ip command args, on the namespace that holds rootIf.
func (h *Host) onLink(args ...string) []string {
	if h.linkNS == "" {
		return append([]string{"ip"}, args...)
	}
	return append([]string{"ip", "-n", h.linkNS}, args...)
}

// Available reports whether test hosts can be made here (root and ip).
func Available() error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: %w", ErrNotRoot, err)
	}
	return nil
}

// New makes host number n (1-250) of the test; it is removed when the test
// ends. Names carry the process ID, so parallel test binaries do not meet.
func New(t testing.TB, n int) *Host {
	t.Helper()
	if err := Available(); err != nil {
		t.Fatal(err)
	}
	h, err := Open(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// Open is New for programs that are not tests (the benchmarks): the
// caller removes the host with Close. A host half made is removed before
// the error is returned.
func Open(n int) (*Host, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if n < 1 || n > 250 {
		return nil, fmt.Errorf("netns: host number %d out of 1-250", n)
	}
	tag := fmt.Sprintf("%d%d", os.Getpid()%100000, n)
	h := &Host{
		Name:    "op" + tag,
		Addr:    fmt.Sprintf("10.213.%d.2", n),
		Gateway: fmt.Sprintf("10.213.%d.1", n),
		rootIf:  "opr" + tag,
		n:       n,
	}
	if err := claim(n); err != nil {
		return nil, err
	}
	nsIf := "opn" + tag
	steps := [][]string{
		{"ip", "netns", "add", h.Name},
		{"ip", "link", "add", h.rootIf, "type", "veth", "peer", "name", nsIf},
		{"ip", "link", "set", nsIf, "netns", h.Name},
		{"ip", "addr", "add", h.Gateway + "/24", "dev", h.rootIf},
		{"ip", "link", "set", h.rootIf, "up"},
		{"ip", "-n", h.Name, "addr", "add", h.Addr + "/24", "dev", nsIf},
		{"ip", "-n", h.Name, "link", "set", nsIf, "up"},
		{"ip", "-n", h.Name, "link", "set", "lo", "up"},
		{"ip", "-n", h.Name, "route", "add", "default", "via", h.Gateway},
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			_ = h.Close()
			return nil, fmt.Errorf("make test host %s: %w", h.Name, err)
		}
	}
	return h, nil
}

// Close removes the host's namespace and link; removing what is already
// gone is not an error.
func (h *Host) Close() error {
	nsErr := run("ip", "netns", "del", h.Name)
	_ = run(h.onLink("link", "del", h.rootIf)...) // gone with the namespace's end of the pair
	if h.n > 0 {
		release(strconv.Itoa(h.n))
	}
	if nsErr != nil && !strings.Contains(nsErr.Error(), "No such file") {
		return nsErr
	}
	return nil
}

// SetLink takes the host's link down (up false: nothing passes either
// way) or brings it back; Cut and Restore are it for tests.
func (h *Host) SetLink(up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	if err := run(h.onLink("link", "set", h.rootIf, state)...); err != nil {
		return fmt.Errorf("set link of %s %s: %w", h.Name, state, err)
	}
	return nil
}

// Cut takes the host's link down: nothing passes either way.
func (h *Host) Cut(t testing.TB) {
	t.Helper()
	if err := h.SetLink(false); err != nil {
		t.Fatal(err)
	}
}

// Restore brings the link back (with its address and the host's route).
func (h *Host) Restore(t testing.TB) {
	t.Helper()
	if err := h.SetLink(true); err != nil {
		t.Fatal(err)
	}
}

// Command is name run inside the host's namespace.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.Name, name}, args...)...)
}

func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Require skips the test when test hosts cannot be made here, unless
// OUTPOST_TEST_REAL=1 (as `make test` sets) says the real parts must be
// tested, in which case it fails.
func Require(t testing.TB) {
	t.Helper()
	realtest.RequireNoError(t, Available())
}
