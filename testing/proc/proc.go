package proc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/outpost-edge/outpost/controlplane/client"
)

// Server is one `outpost server` process.
type Server struct {
	ID       string
	Dir      string
	APIAddr  string
	RaftAddr string
	// Args are extra flags for this server, after the cluster's.
	Args []string
	cmd  *exec.Cmd
	log  *os.File
}

// Cluster is a cluster of real server processes on loopback.
type Cluster struct {
	Bin     string
	Secret  string
	Servers []*Server
	// Args are extra flags for every server.
	Args []string
}

// FreePort returns a loopback address with a port that was free a moment ago.
func FreePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// NewServer is a server, not started, with data dir dir and free
// loopback ports for its API and raft.
func NewServer(id, dir string) (*Server, error) {
	api, err := FreePort()
	if err != nil {
		return nil, err
	}
	raft, err := FreePort()
	if err != nil {
		return nil, err
	}
	return &Server{ID: id, Dir: dir, APIAddr: api, RaftAddr: raft}, nil
}

// StartCluster starts n servers that form one cluster with
// --bootstrap-expect n, and waits until every one is ready.
func StartCluster(ctx context.Context, bin, root string, n int, args ...string) (*Cluster, error) {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	c := &Cluster{Bin: bin, Secret: hex.EncodeToString(b), Args: args}
	for i := range n {
		s, err := NewServer(fmt.Sprintf("s%d", i+1), filepath.Join(root, fmt.Sprintf("s%d", i+1)))
		if err != nil {
			return nil, err
		}
		c.Servers = append(c.Servers, s)
	}
	if err := c.StartFresh(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// StartFresh starts a new cluster's servers, as StartAll does. Ports are
// picked free and bound later by the servers, so a test of another
// package running beside this one can take one meanwhile: the servers
// are then started afresh (new ports, empty data dirs), up to three
// times. On failure every server is stopped.
func (c *Cluster) StartFresh(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		err := c.StartAll(ctx)
		if err == nil {
			return nil
		}
		c.Stop()
		if attempt == 3 || !errors.Is(err, ErrPortTaken) {
			return err
		}
		for _, s := range c.Servers {
			if err := os.RemoveAll(s.Dir); err != nil {
				return err
			}
			if s.APIAddr, err = FreePort(); err != nil {
				return err
			}
			if s.RaftAddr, err = FreePort(); err != nil {
				return err
			}
		}
	}
}

// ErrPortTaken is a server that exited because one of its ports was in
// use.
var ErrPortTaken = errors.New("a port was taken")

// StartAll starts (or restarts) every server with its data dir and waits
// until every one is ready.
func (c *Cluster) StartAll(ctx context.Context) error {
	for _, s := range c.Servers {
		if err := c.Start(s); err != nil {
			return err
		}
	}
	for _, s := range c.Servers {
		if err := s.waitReady(ctx, c.Servers); err != nil {
			return err
		}
	}
	return nil
}

// Start starts (or restarts) s with its data dir.
func (c *Cluster) Start(s *Server) error {
	var join []string
	for _, o := range c.Servers {
		if o != s {
			join = append(join, o.RaftAddr)
		}
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return err
	}
	// As the README says to pass it: from a file, not on the command line.
	// Written once per cluster and never rewritten: the servers share
	// the file, and rewriting it in place while another one starts let
	// that one read it empty (a restart test failed on exactly that).
	secretFile := filepath.Join(filepath.Dir(s.Dir), "cluster-secret")
	if err := writeOnce(secretFile, []byte(c.Secret+"\n")); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(s.Dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	args := append([]string{"server",
		"--id", s.ID, "--data-dir", s.Dir,
		"--api-addr", s.APIAddr, "--raft-addr", s.RaftAddr,
		// Several servers on one host cannot all have gossip's port
		// 6445; these processes do not need to find each other in it.
		"--gossip-addr", "127.0.0.1:0",
		"--bootstrap-expect", fmt.Sprint(len(c.Servers)),
		"--join", strings.Join(join, ","),
		"--cluster-secret-file", secretFile,
		"--log-level", "warn",
	}, c.Args...)
	args = append(args, s.Args...)
	cmd := exec.Command(c.Bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", s.ID, err)
	}
	s.cmd, s.log = cmd, logf
	return nil
}

// Kill stops s with SIGKILL: no shutdown code runs.
func (c *Cluster) Kill(s *Server) {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
	if s.log != nil {
		s.log.Close()
		s.log = nil
	}
}

// KillAll stops every server with SIGKILL at once, as a power cut does.
func (c *Cluster) KillAll() {
	for _, s := range c.Servers {
		c.Kill(s)
	}
}

// Pause freezes s with SIGSTOP: it keeps its sockets and believes what it
// believed, as a server stalled by a frozen VM or a long swap storm does,
// and answers nothing until Resume.
func (c *Cluster) Pause(s *Server) error { return s.signal(syscall.SIGSTOP) }

// Resume lets a paused server run again (SIGCONT).
func (c *Cluster) Resume(s *Server) error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	if s.cmd == nil || s.cmd.Process == nil {
		return errors.New("server " + s.ID + " is not running")
	}
	return s.cmd.Process.Signal(sig)
}

// Terminate stops s gracefully (SIGTERM, SIGKILL after 10 s): a leader
// hands its leadership over first.
func (c *Cluster) Terminate(s *Server) {
	c.terminate([]*Server{s})
}

// Stop ends every server with SIGTERM (SIGKILL after 10 s).
func (c *Cluster) Stop() { c.terminate(c.Servers) }

func (c *Cluster) terminate(servers []*Server) {
	for _, s := range servers {
		if s.cmd != nil && s.cmd.Process != nil {
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
			// A paused server would not see the SIGTERM before its
			// SIGKILL.
			_ = s.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	for _, s := range servers {
		if s.cmd != nil {
			WaitOrKill(s.cmd, 10*time.Second)
			s.cmd = nil
		}
		if s.log != nil {
			s.log.Close()
			s.log = nil
		}
	}
}

// WaitOrKill waits for cmd, a started process that was asked to stop,
// and kills it if it has not ended after grace; it reports whether it
// had to.
func WaitOrKill(cmd *exec.Cmd, grace time.Duration) (killed bool) {
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
		return false
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
		return true
	}
}

// AdminConfig is the client config the server wrote for its admin.
func (s *Server) AdminConfig() (client.Config, error) {
	return client.LoadConfig(filepath.Join(s.Dir, "admin.conf"))
}

// Client is an admin client of this server alone.
func (s *Server) Client() (*client.Client, error) {
	cfg, err := s.AdminConfig()
	if err != nil {
		return nil, err
	}
	return client.New(cfg)
}

// PID is the server's process ID, 0 when it is not running.
func (s *Server) PID() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// WaitReady waits until the server answers /readyz, up to a minute.
func (s *Server) WaitReady(ctx context.Context) error {
	return s.waitReady(ctx, []*Server{s})
}

// waitReady waits until s answers /readyz, up to a minute, and fails at
// once when s or one of its peers exits (a server waiting for peers
// that are gone would wait out the minute). Errors end with the log of
// the server at fault.
func (s *Server) waitReady(ctx context.Context, peers []*Server) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var last error
	for {
		cl, err := s.Client()
		if err == nil {
			_, _, err = cl.Do(ctx, "GET", "/readyz", nil, nil)
		}
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("server %s not ready: %w (last error: %v); its log ends:\n%s", s.ID, ctx.Err(), last, s.logTail(20))
		case <-time.After(100 * time.Millisecond): // polling /readyz, with a deadline
		}
		for _, p := range peers {
			if p.exited() {
				tail := p.logTail(20)
				err := fmt.Errorf("server %s exited; its log ends:\n%s", p.ID, tail)
				if strings.Contains(tail, "address already in use") {
					err = fmt.Errorf("%w: %w", ErrPortTaken, err)
				}
				return err
			}
		}
	}
}

// exited reports whether s's process has ended: it stays a zombie until
// Kill or Stop reaps it, so /proc still has it.
func (s *Server) exited() bool {
	if s.cmd == nil || s.cmd.Process == nil {
		return false // not started
	}
	return !Alive(s.cmd.Process.Pid)
}

// logTail is the last n lines of s's log.
func (s *Server) logTail(n int) string {
	b, err := os.ReadFile(filepath.Join(s.Dir, "server.log"))
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// writeOnce writes data to path unless the file already holds it, through
// a temporary file renamed into place, so that a reader never sees it
// part-written.
func writeOnce(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
