package install

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// fakeSystem is a host: root or not, some PID 1, some ports taken.
type fakeSystem struct {
	root  bool
	pid1  string
	taken map[string]bool // "tcp :6443"
}

func (f *fakeSystem) Root() bool            { return f.root }
func (f *fakeSystem) PID1() (string, error) { return f.pid1, nil }
func (f *fakeSystem) PortFree(network, addr string) error {
	if f.taken[network+" "+addr] {
		return errors.New("address already in use")
	}
	return nil
}

// fakeSystemd records the calls and keeps each unit's states.
type fakeSystemd struct {
	calls   []string
	active  map[string]string
	enabled map[string]string
}

func newFakeSystemd() *fakeSystemd {
	return &fakeSystemd{active: map[string]string{}, enabled: map[string]string{}}
}

func (f *fakeSystemd) call(s string) { f.calls = append(f.calls, s) }
func (f *fakeSystemd) DaemonReload(context.Context) error {
	f.call("daemon-reload")
	return nil
}
func (f *fakeSystemd) EnableUnits(_ context.Context, us []string) error {
	for _, u := range us {
		f.call("enable " + u)
		f.enabled[u] = "enabled"
	}
	return nil
}
func (f *fakeSystemd) DisableUnits(_ context.Context, us []string) error {
	for _, u := range us {
		f.call("disable " + u)
		f.enabled[u] = "disabled"
	}
	return nil
}
func (f *fakeSystemd) StartUnit(_ context.Context, u string) error {
	f.call("start " + u)
	f.active[u] = "active"
	return nil
}
func (f *fakeSystemd) RestartUnit(_ context.Context, u string) error {
	f.call("restart " + u)
	f.active[u] = "active"
	return nil
}
func (f *fakeSystemd) StopUnit(_ context.Context, u string) error {
	f.call("stop " + u)
	f.active[u] = "inactive"
	return nil
}
func (f *fakeSystemd) KillUnit(_ context.Context, u string, _ syscall.Signal) error {
	f.call("kill " + u)
	return nil
}
func (f *fakeSystemd) ActiveState(_ context.Context, u string) (string, error) {
	if s := f.active[u]; s != "" {
		return s, nil
	}
	return "inactive", nil
}
func (f *fakeSystemd) UnitFileState(_ context.Context, u string) (string, error) {
	return f.enabled[u], nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

func newInstaller(t *testing.T, sys *fakeSystem, sd *fakeSystemd) (*Installer, *bytes.Buffer) {
	t.Helper()
	out := new(bytes.Buffer)
	return &Installer{Root: t.TempDir(), Sys: sys, Out: out,
		Connect: func(context.Context) (Systemd, io.Closer, error) { return sd, nopCloser{}, nil }}, out
}

func goodHost() *fakeSystem { return &fakeSystem{root: true, pid1: "systemd"} }

var serverPorts = []Port{{"tcp", ":6443", "--api-addr"}, {"tcp", ":6444", "--raft-addr"}, {"udp", ":6445", "--gossip-port"}}

func serverOptions() Options {
	return Options{Role: Server, Binary: "/usr/local/bin/outpost", Args: []string{"--bootstrap-expect=1"}, Ports: serverPorts}
}

func read(t *testing.T, in *Installer, p string) (string, os.FileMode) {
	t.Helper()
	st, err := os.Stat(under(in.Root, p))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(under(in.Root, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(b), st.Mode().Perm()
}

// The units as the issue asks: notify with a watchdog, restarted by
// systemd, the agent's KillMode=process; no secret in them, the files
// they read named.
func TestUnitRendering(t *testing.T) {
	for _, r := range Roles {
		u := Unit(r, "/usr/bin/outpost")
		for _, want := range []string{"Type=notify\n", "WatchdogSec=60\n", "Restart=always\n", "EnvironmentFile=" + r.EnvFile() + "\n",
			"ExecStartPre=/usr/bin/outpost adm binary install --dir " + r.BinaryDir() + "\n", "$" + r.ArgsVar() + "\n", "WantedBy=multi-user.target\n"} {
			if !strings.Contains(u, want) {
				t.Errorf("%s unit lacks %q:\n%s", r, want, u)
			}
		}
		if got := strings.Contains(u, "KillMode=process\n"); got != (r == Agent) {
			t.Errorf("%s unit: KillMode=process %v, want it for the agent only", r, got)
		}
		if !strings.HasPrefix(u, Marker+"\n") {
			t.Errorf("%s unit does not start with the marker uninstall looks for", r)
		}
	}
	if u := Unit(Server, "/usr/bin/outpost"); !strings.Contains(u, "--cluster-secret-file "+SecretFile) {
		t.Errorf("the server unit does not read the secret's file:\n%s", u)
	}
}

func TestConfigRendering(t *testing.T) {
	files, err := Config(Agent, []string{"--server=https://10.0.0.1:6443", "--labels=a=b"}, "OP1::sha256:ab::id.secret")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].Path != "/etc/outpost/agent.env" || files[0].Mode != 0o600 {
		t.Fatalf("agent files %+v, want agent.env mode 0600", files)
	}
	f := files[0]
	if !strings.Contains(f.Content, `OUTPOST_AGENT_ARGS="--server=https://10.0.0.1:6443 --labels=a=b"`+"\n") || !strings.Contains(f.Content, "\nOUTPOST_JOIN=OP1::sha256:ab::id.secret\n") {
		t.Errorf("agent.env:\n%s", f.Content)
	}
	if strings.Contains(f.Shown(), "id.secret") {
		t.Errorf("--dry-run would show the join string:\n%s", f.Shown())
	}
	files, err = Config(Server, []string{"--bootstrap-expect=1"}, "s3cret-s3cret")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[1].Path != SecretFile || files[1].Mode != 0o600 || files[1].Content != "s3cret-s3cret\n" || strings.Contains(files[1].Shown(), "s3cret") {
		t.Errorf("server files %+v, want the secret alone in a 0600 file, hidden from --dry-run", files)
	}
	// $VAR splits at spaces and takes no quotes: such flags are refused,
	// each named.
	_, err = Config(Agent, []string{"--labels=a b", "--node-name=$x", "--address=1.2.3.4"}, "j")
	if err == nil || !strings.Contains(err.Error(), `"--labels=a b"`) || !strings.Contains(err.Error(), `"--node-name=$x"`) || strings.Contains(err.Error(), "1.2.3.4") {
		t.Errorf("bad flags: %v, want both named, the good one not", err)
	}
}

// Install writes the files with their modes, enables and starts the
// unit; a second run writes nothing, starts nothing and says so; other
// flags rewrite the env file and restart.
func TestInstallIdempotent(t *testing.T) {
	sd := newFakeSystemd()
	in, out := newInstaller(t, goodHost(), sd)
	ctx := context.Background()
	if err := in.Install(ctx, serverOptions()); err != nil {
		t.Fatal(err)
	}
	want := []string{"daemon-reload", "enable outpost-server.service", "start outpost-server.service"}
	if !slices.Equal(sd.calls, want) {
		t.Errorf("first install called %v, want %v", sd.calls, want)
	}
	if _, mode := read(t, in, SecretFile); mode != 0o600 {
		t.Errorf("secret mode %o, want 0600", mode)
	}
	secret, _ := read(t, in, SecretFile)
	if len(strings.TrimSpace(secret)) < 32 {
		t.Errorf("generated secret %q: want at least 32 characters", secret)
	}
	if u, _ := read(t, in, "/etc/systemd/system/outpost-server.service"); u != Unit(Server, "/usr/local/bin/outpost") {
		t.Errorf("unit written:\n%s", u)
	}

	sd.calls = nil
	out.Reset()
	if err := in.Install(ctx, serverOptions()); err != nil {
		t.Fatal(err)
	}
	if len(sd.calls) != 0 || !strings.Contains(out.String(), "nothing changed") || strings.Contains(out.String(), "wrote") {
		t.Errorf("second install called %v and said:\n%s\nwant no call, nothing written, and that said", sd.calls, out)
	}
	if again, _ := read(t, in, SecretFile); again != secret {
		t.Errorf("the secret changed on a second install")
	}

	sd.calls = nil
	o := serverOptions()
	o.Args = append(o.Args, "--log-level=debug")
	if err := in.Install(ctx, o); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sd.calls, []string{"restart outpost-server.service"}) {
		t.Errorf("install with another flag called %v, want a restart only", sd.calls)
	}
}

// A package's identical unit is used as it is; a different one is
// overridden by one in /etc.
func TestInstallUsesPackagedUnit(t *testing.T) {
	sd := newFakeSystemd()
	in, out := newInstaller(t, goodHost(), sd)
	p := under(in.Root, "/usr/lib/systemd/system/outpost-server.service")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(Unit(Server, "/usr/local/bin/outpost")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := in.Install(context.Background(), serverOptions()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(under(in.Root, "/etc/systemd/system/outpost-server.service")); err == nil || slices.Contains(sd.calls, "daemon-reload") {
		t.Errorf("a unit was written beside the package's identical one (calls %v):\n%s", sd.calls, out)
	}
}

// Every reason to refuse is given at once, and nothing is written or
// started.
func TestInstallRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		sys  *fakeSystem
		want []string
	}{
		{"not root", &fakeSystem{root: false, pid1: "systemd"}, []string{"not running as root"}},
		{"no systemd", &fakeSystem{root: true, pid1: "init"}, []string{`systemd is not PID 1 (PID 1 is "init")`}},
		{"ports taken", &fakeSystem{root: true, pid1: "systemd", taken: map[string]bool{"tcp :6443": true, "udp :6445": true}},
			[]string{"tcp :6443 (--api-addr) is taken", "udp :6445 (--gossip-port) is taken"}},
		{"all", &fakeSystem{root: false, pid1: "sh"}, []string{"not running as root", "systemd is not PID 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sd := newFakeSystemd()
			in, _ := newInstaller(t, tc.sys, sd)
			err := in.Install(context.Background(), serverOptions())
			var r *Refusal
			if !errors.As(err, &r) {
				t.Fatalf("install: %v, want a refusal", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), ":6444") {
				t.Errorf("refusal %q names a free port", err)
			}
			if len(sd.calls) != 0 {
				t.Errorf("a refused install called systemd: %v", sd.calls)
			}
			if ents, _ := os.ReadDir(in.Root); len(ents) != 0 {
				t.Errorf("a refused install wrote %v", ents)
			}
		})
	}
}

// The role's ports are its own once it runs: a second install does not
// refuse for them.
func TestInstallRunningSkipsPorts(t *testing.T) {
	sd := newFakeSystemd()
	sd.active["outpost-server.service"] = "active"
	in, _ := newInstaller(t, &fakeSystem{root: true, pid1: "systemd", taken: map[string]bool{"tcp :6443": true}}, sd)
	if err := in.Install(context.Background(), serverOptions()); err != nil {
		t.Errorf("install over the running server: %v", err)
	}
}

func TestInstallAgentNeedsJoin(t *testing.T) {
	in, _ := newInstaller(t, goodHost(), newFakeSystemd())
	o := Options{Role: Agent, Binary: "/usr/bin/outpost", Args: []string{"--server=https://s:6443"}}
	if err := in.Install(context.Background(), o); err == nil || !strings.Contains(err.Error(), "join string is needed") {
		t.Errorf("agent without a join string: %v", err)
	}
	o.Secret = "OP1::sha256:ab::id.secret"
	if err := in.Install(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	// Installed once, the join string is kept when not given again.
	o.Secret = ""
	if err := in.Install(context.Background(), o); err != nil {
		t.Errorf("second install without the join string: %v", err)
	}
	if env, mode := read(t, in, "/etc/outpost/agent.env"); mode != 0o600 || !strings.Contains(env, "OUTPOST_JOIN=OP1::sha256:ab::id.secret\n") {
		t.Errorf("agent.env (%o):\n%s", mode, env)
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	sd := newFakeSystemd()
	in, out := newInstaller(t, goodHost(), sd)
	o := Options{Role: Agent, Binary: "/usr/bin/outpost", Args: []string{"--server=https://s:6443"}, Secret: "OP1::sha256:ab::id.secret", DryRun: true}
	if err := in.Install(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"would write /etc/outpost/agent.env (mode 0600)", "would write /etc/systemd/system/outpost-agent.service (mode 0644)", "KillMode=process", "would enable and start outpost-agent.service"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--dry-run output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out.String(), "id.secret") {
		t.Errorf("--dry-run printed the join string:\n%s", out)
	}
	if ents, _ := os.ReadDir(in.Root); len(ents) != 0 || slices.ContainsFunc(sd.calls, func(c string) bool { return !strings.HasPrefix(c, "state") }) {
		t.Errorf("--dry-run wrote %v, called %v", ents, sd.calls)
	}
}

// Uninstall stops, kills what the agent left, disables, removes what
// install wrote and keeps the data; --purge takes the data too.
func TestUninstall(t *testing.T) {
	sd := newFakeSystemd()
	in, out := newInstaller(t, goodHost(), sd)
	ctx := context.Background()
	if err := in.Install(ctx, serverOptions()); err != nil {
		t.Fatal(err)
	}
	agentData := "/srv/agent-data"
	if err := in.Install(ctx, Options{Role: Agent, Binary: "/usr/local/bin/outpost", Args: []string{"--data-dir=" + agentData}, Secret: "j"}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{agentData, "/var/lib/outpost/server"} {
		if err := os.MkdirAll(under(in.Root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	sd.calls = nil
	if err := in.Uninstall(ctx, Roles, false, false); err != nil {
		t.Fatal(err)
	}
	want := []string{"stop outpost-agent.service", "kill outpost-agent.service", "disable outpost-agent.service",
		"stop outpost-server.service", "disable outpost-server.service", "daemon-reload"}
	if !slices.Equal(sd.calls, want) {
		t.Errorf("uninstall called %v, want %v", sd.calls, want)
	}
	for _, p := range []string{"/etc/outpost", "/etc/systemd/system/outpost-server.service", "/etc/systemd/system/outpost-agent.service"} {
		if _, err := os.Stat(under(in.Root, p)); err == nil {
			t.Errorf("%s left after uninstall", p)
		}
	}
	for _, d := range []string{agentData, "/var/lib/outpost/server"} {
		if _, err := os.Stat(under(in.Root, d)); err != nil {
			t.Errorf("data %s gone without --purge: %v", d, err)
		}
	}
	out.Reset()
	sd.calls = nil
	if err := in.Uninstall(ctx, Roles, false, false); err != nil || !strings.Contains(out.String(), "nothing to uninstall") {
		t.Errorf("second uninstall: %v, %q", err, out)
	}
	// --purge: the agent's data dir is known from its env file only
	// while installed; the default layout is purged anyway.
	if err := in.Install(ctx, Options{Role: Agent, Binary: "/usr/local/bin/outpost", Args: []string{"--data-dir=" + agentData}, Secret: "j"}); err != nil {
		t.Fatal(err)
	}
	if err := in.Uninstall(ctx, Roles, true, false); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{agentData, "/var/lib/outpost"} {
		if _, err := os.Stat(under(in.Root, d)); err == nil {
			t.Errorf("%s left after uninstall --purge", d)
		}
	}
}

// A unit outpost install did not write (an administrator's) stays.
func TestUninstallKeepsForeignUnit(t *testing.T) {
	in, out := newInstaller(t, goodHost(), newFakeSystemd())
	p := under(in.Root, "/etc/systemd/system/outpost-server.service")
	_ = os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte("[Service]\nExecStart=/bin/true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := in.Uninstall(context.Background(), []Role{Server}, false, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil || !strings.Contains(out.String(), "did not write it") {
		t.Errorf("a unit install did not write: %v, %q", err, out)
	}
}

func TestUninstallRefusals(t *testing.T) {
	in, _ := newInstaller(t, &fakeSystem{root: false, pid1: "systemd"}, newFakeSystemd())
	var r *Refusal
	if err := in.Uninstall(context.Background(), Roles, false, false); !errors.As(err, &r) {
		t.Errorf("uninstall as a user: %v, want a refusal", err)
	}
}

// downloaded is an outpost binary in a download directory, outside the
// installer's root: as a user runs it from /tmp or ~/Downloads.
func downloaded(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "outpost")
	if err := os.WriteFile(p, []byte(content), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

// A binary run from a download directory is copied to /usr/local/bin,
// atomically and 0755, and the unit runs the copy, so deleting the
// download leaves a working unit; the same bytes again are "unchanged";
// uninstall removes the copy once no role is left (issue 15, review item
// 1).
func TestInstallCopiesBinary(t *testing.T) {
	sd := newFakeSystemd()
	in, out := newInstaller(t, goodHost(), sd)
	ctx := context.Background()
	o := serverOptions()
	o.Binary = downloaded(t, "outpost v1")

	o.DryRun = true
	if err := in.Install(ctx, o); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "would copy "+o.Binary+" to /usr/local/bin/outpost (mode 0755)") ||
		!strings.Contains(out.String(), "ExecStartPre=/usr/local/bin/outpost adm binary install") || strings.Contains(out.String(), o.Binary+" adm") {
		t.Errorf("--dry-run from a download directory said:\n%s\nwant the copy to /usr/local/bin/outpost, and the unit running it", out)
	}
	if _, err := os.Stat(under(in.Root, LocalBinary)); err == nil {
		t.Errorf("--dry-run copied the binary")
	}

	o.DryRun = false
	out.Reset()
	if err := in.Install(ctx, o); err != nil {
		t.Fatal(err)
	}
	got, mode := read(t, in, LocalBinary)
	if got != "outpost v1" || mode != 0o755 {
		t.Errorf("/usr/local/bin/outpost is %q mode %o, want the running binary's bytes, mode 0755", got, mode)
	}
	if u, _ := read(t, in, "/etc/systemd/system/outpost-server.service"); u != Unit(Server, LocalBinary) {
		t.Errorf("the unit does not run the copy:\n%s", u)
	}
	if strings.Contains(out.String(), o.Binary+" adm") {
		t.Errorf("the download's path is in what was written:\n%s", out)
	}
	if ents, _ := os.ReadDir(under(in.Root, "/usr/local/bin")); len(ents) != 1 {
		t.Errorf("/usr/local/bin holds %v, want the binary alone (no temporary file left)", ents)
	}

	sd.calls = nil
	out.Reset()
	if err := in.Install(ctx, o); err != nil {
		t.Fatal(err)
	}
	if len(sd.calls) != 0 || !strings.Contains(out.String(), "/usr/local/bin/outpost is this binary already: unchanged") || strings.Contains(out.String(), "copied") {
		t.Errorf("a second install called %v and said:\n%s\nwant the binary unchanged and nothing done", sd.calls, out)
	}

	// A new download is a new binary: copied, and the running unit
	// restarted on it.
	o.Binary = downloaded(t, "outpost v2")
	sd.calls = nil
	if err := in.Install(ctx, o); err != nil {
		t.Fatal(err)
	}
	if got, _ := read(t, in, LocalBinary); got != "outpost v2" || !slices.Equal(sd.calls, []string{"restart outpost-server.service"}) {
		t.Errorf("a new binary: /usr/local/bin/outpost is %q, calls %v; want v2 and a restart", got, sd.calls)
	}

	// The agent runs the same copy: uninstalling the server keeps it,
	// uninstalling the agent then removes it.
	a := Options{Role: Agent, Binary: o.Binary, Secret: "OP1::sha256:ab::id.secret"}
	if err := in.Install(ctx, a); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := in.Uninstall(ctx, []Role{Server}, false, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(under(in.Root, LocalBinary)); err != nil || !strings.Contains(out.String(), "kept the outpost binary: outpost-agent.service stays installed") {
		t.Errorf("uninstall server removed the binary the agent's unit runs (%v):\n%s", err, out)
	}
	out.Reset()
	if err := in.Uninstall(ctx, []Role{Agent}, false, false); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{LocalBinary, BinaryNote} {
		if _, err := os.Stat(under(in.Root, p)); err == nil {
			t.Errorf("%s left after the last uninstall:\n%s", p, out)
		}
	}
}

// A binary in /usr/bin (the package's) or /usr/local/bin is run where it
// is: nothing copied, nothing noted, and uninstall leaves it.
func TestInstallPackagedBinaryStays(t *testing.T) {
	for _, bin := range []string{PackagedBinary, LocalBinary} {
		in, out := newInstaller(t, goodHost(), newFakeSystemd())
		if err := os.MkdirAll(filepath.Dir(under(in.Root, bin)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(under(in.Root, bin), []byte("packaged"), 0o755); err != nil {
			t.Fatal(err)
		}
		o := serverOptions()
		o.Binary = bin
		if err := in.Install(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), "cop") || strings.Contains(out.String(), "unchanged") {
			t.Errorf("install from %s said:\n%s\nwant no copy", bin, out)
		}
		if err := in.Uninstall(context.Background(), Roles, false, false); err != nil {
			t.Fatal(err)
		}
		if got, _ := read(t, in, bin); got != "packaged" {
			t.Errorf("uninstall changed %s", bin)
		}
	}
}

// The role's flags are checked before anything: every problem refuses
// the install, the dry run's too, and nothing is written or started
// (issue 15, review item 2).
func TestInstallChecksRoleFlags(t *testing.T) {
	for _, dry := range []bool{true, false} {
		sd := newFakeSystemd()
		in, out := newInstaller(t, &fakeSystem{root: false, pid1: "systemd"}, sd)
		o := Options{Role: Agent, Binary: downloaded(t, "outpost"), Secret: "hello", DryRun: dry,
			Check: func(secret string) error {
				if secret != "hello" {
					t.Errorf("checked with %q, want the join string the unit gets", secret)
				}
				return errors.Join(errors.New("give --server (the API's URL)"), errors.New(`--token: a join string starts with "OP1::"`))
			}}
		err := in.Install(context.Background(), o)
		var r *Refusal
		if !errors.As(err, &r) || !strings.Contains(err.Error(), "give --server") || !strings.Contains(err.Error(), `starts with "OP1::"`) {
			t.Errorf("dry run %v: %v, want a refusal naming both problems", dry, err)
		}
		if got := strings.Contains(err.Error(), "not running as root"); got == dry {
			t.Errorf("dry run %v: refusal %q; want the host's problems only in a real install's", dry, err)
		}
		if strings.Contains(out.String(), "would") || len(sd.calls) != 0 {
			t.Errorf("dry run %v: a refused install said %q, called %v", dry, out, sd.calls)
		}
		if ents, _ := os.ReadDir(in.Root); len(ents) != 0 {
			t.Errorf("a refused install wrote %v", ents)
		}
	}
}

// uninstall --dry-run says what it would stop, kill, disable and remove,
// and does none of it (issue 15, review item 3).
func TestUninstallDryRun(t *testing.T) {
	sd := newFakeSystemd()
	in, out := newInstaller(t, goodHost(), sd)
	ctx := context.Background()
	bin := downloaded(t, "outpost")
	o := serverOptions()
	o.Binary = bin
	if err := in.Install(ctx, o); err != nil {
		t.Fatal(err)
	}
	if err := in.Install(ctx, Options{Role: Agent, Binary: bin, Secret: "j"}); err != nil {
		t.Fatal(err)
	}
	before := listTree(t, in.Root)
	sd.calls = nil
	out.Reset()
	if err := in.Uninstall(ctx, Roles, true, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"would stop outpost-agent.service\n", "would kill what outpost-agent.service left running", "would disable outpost-agent.service\n",
		"would remove /etc/systemd/system/outpost-agent.service\n", "would remove /etc/outpost/agent.env\n",
		"would stop outpost-server.service\n", "would disable outpost-server.service\n", "would remove /etc/outpost/cluster-secret\n",
		"would remove /usr/local/bin/outpost\n", "would remove /etc/outpost/installed-binary\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("uninstall --dry-run lacks %q:\n%s", want, out)
		}
	}
	if len(sd.calls) != 0 {
		t.Errorf("uninstall --dry-run called %v", sd.calls)
	}
	if after := listTree(t, in.Root); !slices.Equal(before, after) {
		t.Errorf("uninstall --dry-run changed the files: %v, then %v", before, after)
	}
	// As a user, without systemd's word: what it would do if they run.
	in.Sys = &fakeSystem{root: false, pid1: "systemd"}
	out.Reset()
	if err := in.Uninstall(ctx, []Role{Server}, false, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "note: a real uninstall would refuse: not running as root") || !strings.Contains(out.String(), "would stop outpost-server.service (if it runs)") {
		t.Errorf("uninstall --dry-run as a user:\n%s", out)
	}
}

// listTree is every path under root.
func listTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
		out = append(out, p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
