package server

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/cli"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// The built-in admin token cannot be deleted, since it would keep working
// (issue 9 item 10); it is rotated instead. A rotation sent to a follower
// reaches the leader; the old token stops working on every server and
// every server's admin.conf gets the new one; a server restarted after
// the rotation never takes the old token, not even for a moment.
func TestAdminTokenRotation(t *testing.T) {
	leader := startServer(t, testConfig(t))
	cfg := fixedPorts(t, testConfig(t))
	cfg.ID, cfg.BootstrapExpect = "s2", 0
	cfg.Join = []string{leader.Node().Status().RaftAddr}
	follower := startServer(t, cfg)
	old := leader.AdminConfig().Token
	if follower.AdminConfig().Token != old {
		t.Fatal("the servers derived different admin tokens")
	}
	oldID, _, _ := strings.Cut(old, ".")

	// Deleting or changing it is refused, saying how to rotate it.
	c := admin(t, leader)
	for _, m := range []string{"DELETE", "PUT"} {
		var body any
		if m == "PUT" {
			body = map[string]any{"metadata": map[string]any{"name": oldID},
				"spec": map[string]any{"role": api.RoleClusterAdmin, "secretHash": strings.Repeat("0", 64)}}
		}
		r := c.do(m, "/apis/outpost.io/v1/tokens/"+oldID, body)
		if r.code != http.StatusForbidden || !strings.Contains(r.status().Message, "outpost adm token rotate-admin") {
			t.Errorf("%s the admin token: %d %s; want 403 naming outpost adm token rotate-admin", m, r.code, r.body)
		}
	}
	// Only a cluster admin may rotate it.
	dev := c.as(addToken(t, c, api.TokenSpec{Role: api.RoleDeveloper, Namespaces: []string{"default"}}))
	if r := dev.do("POST", "/apis/outpost.io/v1/admintoken/rotate", nil); r.code != http.StatusForbidden {
		t.Errorf("a developer rotates the admin token: %d %s", r.code, r.body)
	}

	r := admin(t, follower).must(http.StatusCreated, "POST", "/apis/outpost.io/v1/admintoken/rotate", nil)
	rot := decode[api.AdminTokenRotation](t, r)
	if rot.Generation != 1 || rot.Token == old || !strings.HasPrefix(rot.Token, oldID+".") {
		t.Fatalf("rotation reply: generation %d token changed %v same id %v", rot.Generation, rot.Token != old, strings.HasPrefix(rot.Token, oldID+"."))
	}
	// The follower that forwarded it takes the new token at once: an
	// unknown token makes it catch up and put the admin token's
	// generation in force before it answers.
	newTC(t, follower, rot.Token).must(http.StatusOK, "GET", "/api/v1/namespaces", nil)
	// The leader applied it before answering: the old token is refused
	// there at once.
	if r := c.do("GET", "/api/v1/namespaces", nil); r.code != http.StatusUnauthorized {
		t.Errorf("old admin token on the leader after the rotation: %d", r.code)
	}
	for _, s := range []*Server{leader, follower} {
		waitFor(t, 10*time.Second, s.cfg.ID+" refuses the old admin token and takes the new one", func() bool {
			return newTC(t, s, old).do("GET", "/api/v1/namespaces", nil).code == http.StatusUnauthorized &&
				newTC(t, s, rot.Token).do("GET", "/api/v1/namespaces", nil).code == http.StatusOK
		})
		waitFor(t, 10*time.Second, s.cfg.ID+"'s admin.conf holds the new token", func() bool {
			f, err := client.LoadConfig(s.cfg.AdminConfigPath)
			return err == nil && f.Token == rot.Token && s.AdminConfig().Token == rot.Token
		})
	}
	if r := newTC(t, leader, rot.Token).do("GET", "/apis/outpost.io/v1/tokens/"+oldID, nil); r.code != http.StatusOK ||
		!strings.Contains(string(r.body), `"outpost.io/admin-token-generation":"1"`) {
		t.Errorf("the admin Token object after the rotation: %d %s", r.code, r.body)
	}

	// A restart writes the generation-0 admin.conf at start, then the one
	// in force as soon as it has caught up, before it serves anything.
	if err := follower.Close(); err != nil {
		t.Fatal(err)
	}
	again := startUnready(t, cfg)
	deadline := time.Now().Add(20 * time.Second)
	for {
		code := newTC(t, again, old).do("GET", "/api/v1/namespaces", nil).code
		if code == http.StatusUnauthorized {
			break
		}
		if code != http.StatusServiceUnavailable {
			t.Fatalf("a restarted server answered the rotated-out admin token with %d", code)
		}
		if time.Now().After(deadline) {
			t.Fatal("the restarted server never caught up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	newTC(t, again, rot.Token).must(http.StatusOK, "GET", "/api/v1/namespaces", nil)
	if data, err := os.ReadFile(cfg.AdminConfigPath); err != nil || !strings.Contains(string(data), rot.Token) {
		t.Errorf("the restarted server's admin.conf lacks the token in force: %v", err)
	}
}

// `outpost adm token rotate-admin` rotates the token and rewrites the
// client configuration it used when that held the old token; a token
// given with --token is answered with the new token on standard output.
func TestAdminTokenRotateCommand(t *testing.T) {
	s := startServer(t, testConfig(t))
	data, err := os.ReadFile(s.cfg.AdminConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	mine := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(mine, data, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, int) {
		root := cli.NewRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(args)
		code := cli.Execute(t.Context(), root)
		return out.String(), code
	}
	out, code := run("--config", mine, "adm", "token", "rotate-admin")
	if code != 0 || !strings.Contains(out, "rotated to generation 1") || !strings.Contains(out, mine+" now holds the new token") {
		t.Fatalf("rotate-admin: exit %d: %s", code, out)
	}
	cfg, err := client.LoadConfig(mine)
	if err != nil || cfg.Token != s.AdminConfig().Token {
		t.Fatalf("%s after the rotation: token in force %v, %v", mine, cfg.Token == s.AdminConfig().Token, err)
	}
	if strings.Contains(out, cfg.Token) {
		t.Error("the new token was printed although the configuration file took it")
	}
	newTC(t, s, cfg.Token).must(http.StatusOK, "GET", "/api/v1/namespaces", nil)

	// A token from the environment: the file (which the env's token and
	// server would otherwise leak into) is left alone.
	t.Setenv(client.EnvToken, cfg.Token)
	t.Setenv(client.EnvServer, s.AdminConfig().Server)
	before, _ := os.ReadFile(mine)
	out, code = run("--config", mine, "adm", "token", "rotate-admin")
	if after, _ := os.ReadFile(mine); code != 0 || !bytes.Equal(before, after) || !strings.Contains(out, s.AdminConfig().Token) {
		t.Fatalf("rotate-admin with $%s: exit %d, file changed %v: %s", client.EnvToken, code, !bytes.Equal(before, after), out)
	}
	t.Setenv(client.EnvToken, "")
	cfg.Token = s.AdminConfig().Token

	out, code = run("--config", mine, "--token", cfg.Token, "adm", "token", "rotate-admin")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || !strings.Contains(out, "generation 3") || lines[len(lines)-1] != s.AdminConfig().Token {
		t.Fatalf("rotate-admin --token: exit %d: %s; want the new token on the last line", code, out)
	}
}
