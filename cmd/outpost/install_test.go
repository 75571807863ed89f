package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/internal/install"
)

// install's flags are the role's: given ones go to the env file as
// --name=value (a list flag once per value), a secret on the command
// line is refused, the ports come from the role's flags.
func TestInstallOptionsFromFlags(t *testing.T) {
	dir := t.TempDir()
	join := filepath.Join(dir, "join")
	if err := os.WriteFile(join, []byte("OP1::sha256:ab::id.secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runner := newAgentCommand()
	cmd := newInstallRoleCommand(install.Agent, runner)
	var f installFlags
	if err := cmd.ParseFlags([]string{"--server", "https://10.0.0.1:6443", "--token-file", join, "--listen", "10.0.0.2:10250",
		"--server-arg", "--log-level=debug", "--server-arg", "--event-ttl=2h", "--dry-run"}); err != nil {
		t.Fatal(err)
	}
	f.secretFile, _ = cmd.Flags().GetString("token-file")
	f.dryRun, _ = cmd.Flags().GetBool("dry-run")
	o, err := installOptions(install.Agent, runner, cmd, &f)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--listen=10.0.0.2:10250", "--server=https://10.0.0.1:6443", "--server-arg=--log-level=debug", "--server-arg=--event-ttl=2h"}
	if !slices.Equal(o.Args, want) || o.Secret != "OP1::sha256:ab::id.secret" || !o.DryRun || o.DataDir != "/var/lib/outpost/agent" {
		t.Errorf("options %+v, want args %v, the file's join string, dry run, the default data dir", o, want)
	}
	if len(o.Ports) != 3 || o.Ports[0].Addr != "10.0.0.2:10250" || o.Ports[1].Addr != o.Ports[2].Addr || o.Ports[1].Network != "tcp" || o.Ports[2].Network != "udp" {
		t.Errorf("ports %+v", o.Ports)
	}

	// Secrets and the binary dir are not flags of the installed unit.
	for _, args := range [][]string{{"--token", "OP1::x"}, {"--binary-dir", "/x"}} {
		runner := newAgentCommand()
		cmd := newInstallRoleCommand(install.Agent, runner)
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		if _, err := installOptions(install.Agent, runner, cmd, &installFlags{}); err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("install agent %v: %v, want it refused naming the flag", args, err)
		}
	}
	srv := newServerCommand()
	cmd = newInstallRoleCommand(install.Server, srv)
	if err := cmd.ParseFlags([]string{"--cluster-secret", strings.Repeat("x", 40)}); err != nil {
		t.Fatal(err)
	}
	if _, err := installOptions(install.Server, srv, cmd, &installFlags{}); err == nil || !strings.Contains(err.Error(), "ps") {
		t.Errorf("install server --cluster-secret: %v, want it refused (ps shows it)", err)
	}
}

// A server neither joining nor bootstrapping several is a cluster of
// one.
func TestInstallServerDefaultsToOne(t *testing.T) {
	srv := newServerCommand()
	cmd := newInstallRoleCommand(install.Server, srv)
	if err := cmd.ParseFlags([]string{"--api-addr", "127.0.0.1:16443"}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OUTPOST_CLUSTER_SECRET", "")
	o, err := installOptions(install.Server, srv, cmd, &installFlags{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Args, []string{"--api-addr=127.0.0.1:16443", "--bootstrap-expect=1"}) {
		t.Errorf("args %v", o.Args)
	}
	if o.Ports[0].Addr != "127.0.0.1:16443" || o.Ports[2].Addr != ":6445" {
		t.Errorf("ports %+v: want the API's and the gossip pool's beside raft's", o.Ports)
	}
}
