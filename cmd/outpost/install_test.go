package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

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
	cmd := newInstallRoleCommand(install.Agent, runner, nil)
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
		cmd := newInstallRoleCommand(install.Agent, runner, nil)
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		if _, err := installOptions(install.Agent, runner, cmd, &installFlags{}); err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("install agent %v: %v, want it refused naming the flag", args, err)
		}
	}
	srv := newServerCommand()
	cmd = newInstallRoleCommand(install.Server, srv, nil)
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
	cmd := newInstallRoleCommand(install.Server, srv, nil)
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

// install checks the role's flags with the role's own check, listing
// every problem, as `outpost agent` and `outpost server` refuse them at
// start (issue 15, review item 2); good flags pass.
func TestInstallChecksRoleFlags(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("join", "OP1::sha256:"+strings.Repeat("ab", 32)+"::abcdef.0123456789abcdef\n")
	hello := file("hello", "hello\n")
	t.Setenv("OUTPOST_JOIN", "")
	t.Setenv("OUTPOST_CLUSTER_SECRET", "")
	for _, tc := range []struct {
		role       install.Role
		args, want []string
	}{
		{install.Agent, []string{"--token-file", good}, []string{"give --server (the API's URL)"}},
		{install.Agent, []string{"--token-file", hello, "--server", "https://10.0.0.1:6443"}, []string{`a join string starts with "OP1::"`}},
		{install.Agent, []string{"--token-file", hello, "--log-level", "loud", "--cluster-dns", "x", "--eviction-hard", "memory.available<lots"},
			[]string{`--log-level "loud"`, "give --server", `a join string starts with "OP1::"`, `--cluster-dns "x"`, "--eviction-hard"}},
		{install.Agent, []string{"--token-file", good, "--server", "ftp://10.0.0.1"}, []string{`--server: invalid server URL "ftp://10.0.0.1"`}},
		{install.Server, []string{"--log-level", "loud"}, []string{`--log-level "loud"`}},
		{install.Server, []string{"--log-level", "loud", "--raft-heartbeat-timeout", "1ms", "--node-eviction-rate", "0", "--advertise-api", "x"},
			[]string{`--log-level "loud"`, "--raft-heartbeat-timeout 1ms", "--node-eviction-rate 0", `AdvertiseAPI "x"`}},
		{install.Server, []string{"--cluster-secret-file", hello}, []string{"cluster secret has 5 characters, need at least 32"}},
		// Good flags are not refused; host:port is a server URL as kubectl
		// takes it.
		{install.Agent, []string{"--token-file", good, "--server", "10.0.0.1:6443"}, nil},
		{install.Agent, []string{"--token-file", good, "--server", "https://10.0.0.1:6443", "--log-level", "debug"}, nil},
		{install.Server, []string{"--log-level", "warn"}, nil},
	} {
		var runner *cobra.Command
		var check roleCheck
		if tc.role == install.Agent {
			runner, check = newAgentRole()
			tc.args = append(tc.args, "--data-dir", filepath.Join(dir, "agent"))
		} else {
			runner, check = newServerRole()
			tc.args = append(tc.args, "--data-dir", filepath.Join(dir, "server"))
		}
		cmd := newInstallRoleCommand(tc.role, runner, check)
		if err := cmd.ParseFlags(append(tc.args, "--dry-run")); err != nil {
			t.Fatal(err)
		}
		f := installFlags{check: check}
		f.dryRun = true
		if tc.role == install.Agent {
			f.secretFile, _ = cmd.Flags().GetString("token-file")
		} else {
			f.secretFile, _ = cmd.Flags().GetString("cluster-secret-file")
		}
		o, err := installOptions(tc.role, runner, cmd, &f)
		if err != nil {
			t.Fatal(err)
		}
		secret := o.Secret
		if secret == "" {
			secret = strings.Repeat("s", 40) // as install makes one
		}
		err = o.Check(secret)
		if tc.want == nil {
			if err != nil {
				t.Errorf("install %s %v: refused good flags: %v", tc.role, tc.args, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("install %s %v: no problem found, want %q", tc.role, tc.args, tc.want)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("install %s %v: %v\nwant it to say %q", tc.role, tc.args, err, w)
			}
		}
	}
}
