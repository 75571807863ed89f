package cli

import (
	"bufio"
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/testing/syncbuf"
)

// withPortForward makes f answer port-forward requests as the API server
// and the pod do: each line comes back as "echo: LINE" while the caller
// still sends, and the end of the caller's body is answered with "bye".
func withPortForward(f *fakeAPI) {
	f.route(func(p string) bool { return strings.HasSuffix(p, "/portforward") }, func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.EnableFullDuplex()
		w.WriteHeader(200)
		_ = rc.Flush()
		br := bufio.NewReader(r.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				io.WriteString(w, "bye\n")
				return
			}
			io.WriteString(w, "echo: "+line)
			_ = rc.Flush()
		}
	})
}

// startPortForward runs `port-forward pod/web :8080` against f until the
// test ends (when it must exit 0, as ended by the user) and returns the
// local address it listens on and its output.
func startPortForward(t *testing.T, f *fakeAPI) (addr string, out, errb *syncbuf.Buffer) {
	t.Helper()
	config := filepath.Join(t.TempDir(), "config")
	if f.srv.TLS != nil {
		// The test server's certificate is its own CA.
		ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
		if err := client.WriteConfig(config, client.Config{Server: f.srv.URL, CAData: ca}); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(client.EnvConfig, config)
	root := newRootCommand(&options{now: func() time.Time { return testNow }})
	out, errb = &syncbuf.Buffer{}, &syncbuf.Buffer{}
	root.SetOut(out)
	root.SetErr(errb)
	root.SetArgs([]string{"--server", f.srv.URL, "--insecure", "port-forward", "pod/web", ":8080"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- Execute(ctx, root) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("port-forward ended by the user exited %d: %s", code, errb.String())
		}
	})

	// The local port is any free one; the command says which.
	listening := regexp.MustCompile(`^Forwarding from (127\.0\.0\.1:\d+) -> 8080\n`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := listening.FindStringSubmatch(out.String()); m != nil {
			return m[1], out, errb
		}
		select {
		case code := <-done:
			done <- code
			t.Fatalf("port-forward ended early with %d: %q %q", code, out.String(), errb.String())
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("port-forward did not listen: %q %q", out.String(), errb.String())
		}
	}
}

const runningWebPod = `{"metadata":{"name":"web","namespace":"default"},"spec":{"containers":[{"name":"c"}]},"status":{"phase":"Running","podIP":"10.42.0.5"}}`

func TestPortForwardCommand(t *testing.T) {
	f := newFakeAPI(t)
	withPortForward(f)
	f.put(podR, runningWebPod)
	f.put(podR, `{"metadata":{"name":"new","namespace":"default"},"spec":{"containers":[{"name":"c"}]},"status":{"phase":"Pending"}}`)
	addr, out, _ := startPortForward(t, f)
	// Two connections, one after the other, each with its own stream.
	for range 2 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(conn)
		for _, line := range []string{"ping\n", "pong\n"} {
			io.WriteString(conn, line)
			if got, err := br.ReadString('\n'); err != nil || got != "echo: "+line {
				t.Fatalf("got %q, %v; want the pod's answer to %q", got, err, line)
			}
		}
		conn.(*net.TCPConn).CloseWrite()
		if rest, err := io.ReadAll(br); err != nil || string(rest) != "bye\n" {
			t.Fatalf("after closing our side: %q, %v", rest, err)
		}
		conn.Close()
	}
	if !f.sawRequest("POST /api/v1/namespaces/default/pods/web/portforward?port=8080") {
		t.Errorf("requests %v", f.requests)
	}
	if got := strings.Count(out.String(), "Handling connection for "); got != 2 {
		t.Errorf("%d connection lines:\n%s", got, out.String())
	}

	expect(t, "not running", f.run("port-forward", "new", "80"), 1, "", "error: unable to forward port because pod is not running. Current status=Pending\n")
	expect(t, "bad port", f.run("port-forward", "web", "80:http"), 1, "",
		"error: invalid port \"http\" in \"80:http\": want [LOCAL_PORT:]REMOTE_PORT, ports 1 to 65535 (LOCAL_PORT empty or 0: any free port)\nSee 'outpost port-forward --help' for usage.\n")
	expect(t, "not a pod", f.run("port-forward", "svc/web", "80"), 1, "",
		"error: \"svc/web\": a Service has no pods to choose from; give deployment/NAME, daemonset/NAME or replicaset/NAME\nSee 'outpost port-forward --help' for usage.\n")
}

func TestParseForwardedPort(t *testing.T) {
	for in, want := range map[string]forwardedPort{"80": {80, 80}, "8080:80": {8080, 80}, ":80": {0, 80}, "0:80": {0, 80}} {
		if got, err := parseForwardedPort(in); err != nil || got != want {
			t.Errorf("parseForwardedPort(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "80:", "x", "1:70000", "-1:80", ""} {
		if _, err := parseForwardedPort(in); err == nil {
			t.Errorf("parseForwardedPort(%q) took it", in)
		}
	}
}

// TestPortForwardRefused: when the server refuses a connection's forward
// (here as for a node without an agent endpoint, answering before it reads
// the connection's bytes), the local connection is closed and the error
// printed at once, not when the local client gives up (issue 15 review
// item 3). Over HTTP/2 with TLS, as the real server speaks, and HTTP/1.
func TestPortForwardRefused(t *testing.T) {
	for _, h2 := range []bool{true, false} {
		t.Run(map[bool]string{true: "HTTP/2", false: "HTTP/1.1"}[h2], func(t *testing.T) {
			f := &fakeAPI{t: t, objs: map[string]map[string]any{}, watchHold: make(chan struct{})}
			f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
			if h2 {
				f.srv.EnableHTTP2 = true
				f.srv.StartTLS()
			} else {
				f.srv.Start()
			}
			t.Cleanup(f.srv.Close)
			refusal := "node sim-0001 reports no agent endpoint (status.daemonEndpoints.kubeletEndpoint.Port is unset)"
			f.route(func(p string) bool { return strings.HasSuffix(p, "/portforward") }, func(w http.ResponseWriter, r *http.Request) {
				// As the real server, which refuses after this.
				_ = http.NewResponseController(w).EnableFullDuplex()
				// The local client's first bytes have come (the refusal
				// takes the real server a lookup), so the client's next
				// Read of the connection waits for bytes that never come.
				_, _ = r.Body.Read(make([]byte, 1))
				writeStatus(w, &api.StatusError{Status: api.Status{Code: 503, Reason: api.ReasonServiceUnavailable, Message: refusal}})
			})
			f.put(podR, runningWebPod)
			addr, _, errb := startPortForward(t, f)

			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// A client that sends its request and waits for the answer.
			io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("the local connection got %d bytes, %v; want it closed at once", n, err)
			}
			want := "error forwarding port 8080 to pod web: Error from server (ServiceUnavailable): " + refusal + "\n"
			for deadline := time.Now().Add(5 * time.Second); errb.String() != want; {
				if time.Now().After(deadline) {
					t.Fatalf("stderr %q, want %q", errb.String(), want)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
}
