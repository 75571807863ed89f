package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/cli"
)

// TestDevPrintsConsoleURL: `outpost dev` says, in the line that names its
// data and admin config, where the console is; the URL it prints serves
// the console, and the server's address opened by a browser leads there.
func TestDevPrintsConsoleURL(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	root := newRootCommand()
	root.SetArgs([]string{"dev", "--no-agent", "--log-level", "error",
		"--data-dir", filepath.Join(dir, "data"), "--admin-config", filepath.Join(dir, "config"),
		"--api-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0"})
	root.SetOut(io.Discard)
	root.SetErr(pw)
	done := make(chan int, 1)
	go func() {
		code := cli.Execute(ctx, root)
		pw.Close()
		done <- code
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	banner := regexp.MustCompile(`^outpost dev: data in (\S+), admin config in (\S+), console: (https://127\.0\.0\.1:\d+/ui/)$`)
	var m []string
	deadline := time.After(60 * time.Second)
	for m == nil {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("outpost dev ended (exit %d) without its console line", <-done)
			}
			m = banner.FindStringSubmatch(l)
		case <-deadline:
			t.Fatal("no console line from outpost dev within 60 s")
		}
	}
	go func() { // the rest of stderr, so that dev never blocks on it
		for range lines {
		}
	}()
	if m[1] != filepath.Join(dir, "data") || m[2] != filepath.Join(dir, "config") {
		t.Errorf("banner names data %s and config %s", m[1], m[2])
	}

	// The cluster CA's ed25519 certificate is not what is checked here.
	hc := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       10 * time.Second,
	}
	defer hc.CloseIdleConnections()
	get := func(url, accept string) *http.Response {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", accept)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := get(m[3], "text/html"); r.StatusCode != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET %s: %d %s, want the console's page", m[3], r.StatusCode, r.Header.Get("Content-Type"))
	}
	base := strings.TrimSuffix(m[3], "ui/")
	if r := get(base, "text/html,*/*;q=0.8"); r.StatusCode != http.StatusFound || r.Header.Get("Location") != "/ui/" {
		t.Errorf("GET %s from a browser: %d to %q, want 302 to /ui/", base, r.StatusCode, r.Header.Get("Location"))
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("outpost dev exited %d after its context ended", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("outpost dev did not stop within 30 s of its context ending")
	}
}
