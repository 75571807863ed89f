package cli

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// TestUnauthorizedHint: a refused token is followed by a line naming
// where the token came from and how to get one (issue 15 review item 6).
func TestUnauthorizedHint(t *testing.T) {
	f := newFakeAPI(t)
	f.route(func(string) bool { return true }, func(w http.ResponseWriter, _ *http.Request) {
		writeStatus(w, api.NewUnauthorized("Unauthorized"))
	})
	refused := func(from string) string {
		return "Error from server (Unauthorized): Unauthorized\n" +
			"You must be logged in to the server: the token from " + from + " was refused; an administrator creates one with `outpost adm token create`.\n"
	}
	expect(t, "--token", f.run("--token", "bad.token", "get", "pods"), 1, "", refused("--token"))
	expect(t, "no token", f.run("get", "pods"), 1, "",
		"Error from server (Unauthorized): Unauthorized\n"+
			"You must be logged in to the server: no token was given (--token, $OUTPOST_TOKEN or the config file's token); an administrator creates one with `outpost adm token create`.\n")

	config := filepath.Join(t.TempDir(), "config")
	if err := client.WriteConfig(config, client.Config{Server: f.srv.URL, Token: "old.token"}); err != nil {
		t.Fatal(err)
	}
	expect(t, "--config", f.run("--config", config, "get", "pods"), 1, "", refused(config))

	// $OUTPOST_TOKEN over the file $OUTPOST_CONFIG names.
	t.Setenv(client.EnvConfig, config)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv(client.EnvServer, "")
	t.Setenv(client.EnvToken, "")
	run := func() result {
		root := newRootCommand(&options{now: func() time.Time { return testNow }})
		var out, errb bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errb)
		root.SetArgs([]string{"--insecure", "get", "pods"})
		code := Execute(context.Background(), root)
		return result{out.String(), errb.String(), code}
	}
	expect(t, "config file", run(), 1, "", refused(config))
	t.Setenv(client.EnvToken, "env.token")
	expect(t, "$OUTPOST_TOKEN", run(), 1, "", refused("$OUTPOST_TOKEN"))

	// Other refusals get no such line.
	if res := f.run("--token", "x", "get", "pods", "-o", "bad"); strings.Contains(res.stderr, "logged in") {
		t.Errorf("a usage error got the hint: %q", res.stderr)
	}
}
