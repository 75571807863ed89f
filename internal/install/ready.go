package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/outpost-edge/outpost/agent"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// Progress shows one changing status: rewritten in place on a terminal,
// a plain line for each new status otherwise (a log, a pipe).
type Progress struct {
	w     io.Writer
	tty   bool
	last  string
	start time.Time
}

// NewProgress writes to w; tty says whether w is a terminal (IsTerminal).
func NewProgress(w io.Writer, tty bool) *Progress {
	return &Progress{w: w, tty: tty, start: time.Now()}
}

// IsTerminal reports whether fd is a terminal.
func IsTerminal(fd uintptr) bool {
	_, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
	return err == nil
}

// Status shows s, with the time since the progress began on a terminal.
func (p *Progress) Status(s string) {
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s (%ds)", s, int(time.Since(p.start).Seconds()))
	} else if s != p.last {
		fmt.Fprintln(p.w, s)
	}
	p.last = s
}

// Done ends the progress with s on a line of its own.
func (p *Progress) Done(s string) {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintln(p.w, s)
}

// WaitReady waits, polling every second until ctx ends, for the
// installed role to be ready, showing what it waits for: a server's API
// answering /readyz (it has a leader, has caught up and holds the
// cluster's bootstrap objects), an agent's Node Ready through the API
// with the agent's own credential. It fails at once when the unit has
// failed.
func WaitReady(ctx context.Context, sd Systemd, o Options, p *Progress) error {
	dataDir := o.DataDir
	if dataDir == "" {
		dataDir = o.Role.DataDir()
	}
	check := map[Role]func(context.Context, string) (bool, string){Server: serverReady, Agent: agentReady}[o.Role]
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if st, err := sd.ActiveState(ctx, o.Role.Unit()); err == nil && st == "failed" {
			p.Done(o.Role.Unit() + " failed")
			return fmt.Errorf("%s failed: see journalctl -u %s", o.Role.Unit(), o.Role.Unit())
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ok, status := check(cctx, dataDir)
		cancel()
		if ok {
			p.Done(status)
			return nil
		}
		p.Status(status)
		select {
		case <-ctx.Done():
			p.Done("gave up waiting: " + status)
			return fmt.Errorf("%s is not ready (%s): %w", o.Role.Unit(), status, ctx.Err())
		case <-t.C:
		}
	}
}

// serverReady asks the server's /readyz with the admin config it writes
// in its data dir.
func serverReady(ctx context.Context, dataDir string) (bool, string) {
	path := filepath.Join(dataDir, "admin.conf")
	cfg, err := client.LoadConfigFile(path)
	if err != nil {
		return false, "waiting for the server to write " + path
	}
	c, err := client.New(cfg)
	if err != nil {
		return false, "the server's admin config: " + err.Error()
	}
	if _, _, err := c.Do(ctx, http.MethodGet, "/readyz", nil, nil); err != nil {
		return false, "waiting for the API at " + cfg.Server + " to be ready: " + shortError(err)
	}
	return true, "the server is ready: its API at " + cfg.Server + " answers /readyz"
}

// agentReady looks at the agent's Node with the agent's credential.
func agentReady(ctx context.Context, dataDir string) (bool, string) {
	cfg, name, ok, err := agent.SavedNodeClient(dataDir)
	switch {
	case err != nil:
		return false, "the agent's credential: " + err.Error()
	case !ok:
		return false, "waiting for the agent to join the cluster"
	}
	c, err := client.New(cfg)
	if err != nil {
		return false, "the agent's credential: " + err.Error()
	}
	obj, err := c.Get(ctx, api.ResourceForKind("Node"), "", name, client.GetOptions{})
	if err != nil {
		return false, "waiting for node " + name + " to register: " + shortError(err)
	}
	n, _ := obj.(*api.Node)
	if n == nil {
		return false, "waiting for node " + name
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == api.NodeReady {
			if cond.Status == api.ConditionTrue {
				return true, "node " + name + " is Ready"
			}
			return false, fmt.Sprintf("waiting for node %s to be Ready: Ready=%s %s", name, cond.Status, cond.Message)
		}
	}
	return false, "waiting for node " + name + " to report its conditions"
}

func shortError(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "no answer yet"
	}
	return err.Error()
}
