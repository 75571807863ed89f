package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// The server role (SPEC CPL-2, issue 11 item 4). A host made eligible
// (--control-plane-eligible, with the cluster secret's file) may be asked,
// in the leader's reply to its heartbeat, to serve: the control plane
// machine set chose it to replace a member. The agent then starts
// `outpost server` of its own binary, which joins through the servers
// named in the request as a non-voter and is promoted once caught up (the
// join path every server takes). The command is saved in the data dir, so
// a restarted agent starts the same server again; a host whose machine's
// deletion reached its provider is asked to release, and the agent stops
// the role and forgets it.

// ServerRole runs this host's server; the agent picks systemd when the
// host booted with it, else a child process.
type ServerRole interface {
	// Start runs `outpost server` with args (the binary's path not
	// included) until Stop; starting what runs already is no error.
	Start(ctx context.Context, args []string) error
	// Stop ends the server and keeps it from starting again.
	Stop(ctx context.Context) error
}

// serverRoleFile holds the server role's command once the agent started
// it.
const serverRoleFile = "server-role.json"

type savedRole struct {
	Args      []string  `json:"args"`
	StartedAt time.Time `json:"startedAt"`
	Domain    string    `json:"domain,omitempty"`
}

// serverArgs is the server's command for a request: this host's node name
// as its raft ID (a machine is named after its node, and the quorum guard
// finds a member's machine by that name), its own data dir, the agent's
// address as what it advertises, gossip on the port after the agent's,
// then the configured extra arguments, which win.
func (a *Agent) serverArgs(req *api.ServerRoleRequest) []string {
	args := []string{"server",
		"--id", a.cfg.NodeName,
		"--data-dir", a.cfg.ServerDataDir,
		"--join", strings.Join(req.Join, ","),
		"--cluster-secret-file", a.cfg.ClusterSecretFile,
		"--advertise-api", scheme(a.cred.Server) + "://" + hostPort(a.address, 6443),
		"--advertise-raft", hostPort(a.address, 6444),
		"--gossip-port", strconv.Itoa(a.cfg.GossipPort + 1),
	}
	if scheme(a.cred.Server) == "http" {
		args = append(args, "--insecure")
	}
	return append(args, a.cfg.ServerArgs...)
}

func scheme(url string) string {
	if strings.HasPrefix(url, "http://") {
		return "http"
	}
	return "https"
}

func hostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}

// serveIfAsked starts the server role when the leader asks and this
// host may serve.
func (a *Agent) serveIfAsked(ctx context.Context, req *api.ServerRoleRequest) {
	if req == nil || a.released.Load() {
		return
	}
	if !a.cfg.ControlPlaneEligible {
		// Asked at every heartbeat until the set gives up on the host:
		// said once.
		if !a.refusedRole.Swap(true) {
			a.log.Warn("the control plane asks this host to serve, but the agent was not started with --control-plane-eligible")
		}
		return
	}
	a.roleMu.Lock()
	defer a.roleMu.Unlock()
	if a.roleStarted {
		return
	}
	if len(req.Join) == 0 {
		a.log.Warn("the control plane asks this host to serve but names no server to join")
		return
	}
	saved := savedRole{Args: a.serverArgs(req), StartedAt: a.now().UTC(), Domain: req.Domain}
	if err := writeJSONFile(filepath.Join(a.cfg.DataDir, serverRoleFile), saved); err != nil {
		a.log.Error("saving the server role", "err", err)
		return
	}
	a.log.Info("the control plane asks this host to serve: starting the server role", "domain", req.Domain, "join", req.Join)
	if err := a.role.Start(ctx, saved.Args); err != nil {
		a.log.Error("starting the server role", "err", err)
		return
	}
	a.roleStarted = true
}

// resumeServerRole starts the saved server role of an earlier run.
func (a *Agent) resumeServerRole(ctx context.Context) error {
	var saved savedRole
	b, err := os.ReadFile(filepath.Join(a.cfg.DataDir, serverRoleFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("server role: %w", err)
	}
	if err := json.Unmarshal(b, &saved); err != nil || len(saved.Args) == 0 {
		return fmt.Errorf("server role: %s is damaged (remove it to stop serving): %v", serverRoleFile, err)
	}
	a.roleMu.Lock()
	defer a.roleMu.Unlock()
	a.log.Info("this host serves (started by the agent at " + saved.StartedAt.Format(time.RFC3339) + "): starting the server role")
	if err := a.role.Start(ctx, saved.Args); err != nil {
		return fmt.Errorf("server role: %w", err)
	}
	a.roleStarted = true
	return nil
}

// release stops outpost's roles on this host once its machine's deletion
// reached the provider: the server role (the systemd unit stops whether
// the agent or an installer made it), then it tells the control plane on
// the Node. The agent keeps running until a person stops it: its
// credential is revoked next.
func (a *Agent) release(ctx context.Context) {
	if a.released.Swap(true) {
		return
	}
	a.log.Warn("this host's machine is being deleted: stopping outpost's roles; the host may be powered off once done")
	a.roleMu.Lock()
	if err := a.role.Stop(ctx); err != nil {
		a.log.Error("stopping the server role", "err", err)
	}
	a.roleStarted = false
	if err := os.Remove(filepath.Join(a.cfg.DataDir, serverRoleFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		a.log.Warn("forgetting the server role", "err", err)
	}
	a.roleMu.Unlock()
	for attempt := 0; attempt < 5 && ctx.Err() == nil; attempt++ {
		if err := a.annotateNode(ctx, api.AnnotationRolesStopped, a.now().UTC().Format(time.RFC3339)); err == nil {
			return
		} else {
			a.log.Warn("telling the control plane the roles stopped", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second << attempt):
		}
	}
}

// annotateNode sets one annotation on the agent's Node.
func (a *Agent) annotateNode(ctx context.Context, key, value string) error {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	obj, err := a.cl.Get(rctx, nodesResource, "", a.cfg.NodeName, client.GetOptions{})
	if err != nil {
		return err
	}
	n := obj.(*api.Node)
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[key] = value
	_, _, err = a.cl.Update(rctx, n)
	return err
}

// writeJSONFile writes v as JSON to path (mode 0600), atomically.
func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b, 0o600)
}

// writeFileAtomic replaces path with data through a temporary file and a
// rename: a crash leaves the old file or the new, and a container
// starting beside a pod's file never mounts half of it.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// defaultServerRole is systemd's unit when the host booted with systemd,
// else a child process.
func defaultServerRole(log *slog.Logger, dataDir string) ServerRole {
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		if _, err := exec.LookPath("systemctl"); err == nil {
			return &SystemdRole{UnitDir: "/etc/systemd/system", Log: log}
		}
	}
	return &ProcessRole{LogFile: filepath.Join(dataDir, "server.log"), Log: log}
}

// ProcessRole runs the server as a child of the agent, restarted with
// back-off when it exits. The child gets SIGTERM when the agent dies, and
// the next agent starts it again: there is no supervisor above them.
type ProcessRole struct {
	// Binary is the outpost binary (default: this one).
	Binary  string
	LogFile string
	Log     *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs the server until Stop.
func (p *ProcessRole) Start(_ context.Context, args []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel != nil {
		return nil
	}
	bin := p.Binary
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return fmt.Errorf("the agent's own binary: %w", err)
		}
	}
	// The supervisor outlives the request that started it: Stop ends it.
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done = cancel, make(chan struct{})
	go p.supervise(ctx, bin, args, p.done)
	return nil
}

func (p *ProcessRole) supervise(ctx context.Context, bin string, args []string, done chan struct{}) {
	defer close(done)
	// Pdeathsig follows the thread that forked the child: keep it.
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	backoff := time.Second
	for ctx.Err() == nil {
		began := time.Now()
		err := p.runOnce(ctx, bin, args)
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > time.Minute {
			backoff = time.Second
		}
		p.Log.Warn("the server role exited; starting it again", "err", err, "after", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func (p *ProcessRole) runOnce(ctx context.Context, bin string, args []string) error {
	logf, err := os.OpenFile(p.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return err
	}
	p.Log.Info("server role started", "pid", cmd.Process.Pid, "log", p.LogFile)
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		return err
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-waited:
			return err
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			return <-waited
		}
	}
}

// Stop ends the server and waits until it exited.
func (p *ProcessRole) Stop(context.Context) error {
	p.mu.Lock()
	cancel, done := p.cancel, p.done
	p.cancel, p.done = nil, nil
	p.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	<-done
	return nil
}

// SystemdRole runs the server as the unit outpost-server.service, which
// systemd restarts and starts at boot; Stop disables it, whoever made it.
type SystemdRole struct {
	UnitDir string
	// Binary is the outpost binary (default: this one).
	Binary string
	Log    *slog.Logger
	// systemctl runs systemctl (tests replace it).
	systemctl func(ctx context.Context, args ...string) error
}

// ServerUnit is the server role's systemd unit.
const ServerUnit = "outpost-server.service"

// Start writes the unit and enables and starts it.
func (s *SystemdRole) Start(ctx context.Context, args []string) error {
	bin := s.Binary
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return fmt.Errorf("the agent's own binary: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(s.UnitDir, ServerUnit), []byte(serverUnit(bin, args)), 0o644); err != nil {
		return fmt.Errorf("server unit: %w", err)
	}
	if err := s.run(ctx, "daemon-reload"); err != nil {
		return err
	}
	return s.run(ctx, "enable", "--now", ServerUnit)
}

// Stop disables and stops the unit.
func (s *SystemdRole) Stop(ctx context.Context) error {
	return s.run(ctx, "disable", "--now", ServerUnit)
}

func (s *SystemdRole) run(ctx context.Context, args ...string) error {
	if s.systemctl != nil {
		return s.systemctl(ctx, args...)
	}
	out, err := exec.CommandContext(ctx, "systemctl", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("systemctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// BinaryDir is where a server unit's binary lives, so that a release
// can replace it (package selfupdate).
const BinaryDir = "/var/lib/outpost/bin"

// serverUnit is the unit file for bin with args (args[0] is "server"),
// each argument quoted as systemd's command lines read them. As the
// packaged unit, it runs the binary from BinaryDir: bin is copied there
// at the first start, a binary on trial is checked by the good one
// before each start and its end recorded after each stop.
func serverUnit(bin string, args []string) string {
	q := func(args ...string) string {
		out := make([]string, len(args))
		for i, s := range args {
			out[i] = systemdQuote(s)
		}
		return strings.Join(out, " ")
	}
	good := filepath.Join(BinaryDir, "good", "outpost")
	run := append([]string{filepath.Join(BinaryDir, "current", "outpost")}, args...)
	run = append(run, "--binary-dir", BinaryDir)
	return `[Unit]
Description=outpost server (started by the outpost agent: the control plane chose this host)
Wants=network-online.target
After=network-online.target
StartLimitIntervalSec=0

[Service]
ExecStartPre=` + q(bin, "adm", "binary", "install", "--dir", BinaryDir) + `
ExecStartPre=` + q(good, "adm", "binary", "check", "--dir", BinaryDir) + `
ExecStart=` + q(run...) + `
ExecStopPost=` + q(good, "adm", "binary", "stopped", "--dir", BinaryDir) + `
Restart=always
RestartSec=2
LimitNOFILE=1048576

[Install]
WantedBy=multi-user.target
`
}

func systemdQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `%`, `%%`, `$`, `$$`)
	return `"` + r.Replace(s) + `"`
}
