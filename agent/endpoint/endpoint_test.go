package endpoint

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/agent/endpoint/endpointtest"
	"github.com/outpost-edge/outpost/agent/endpoint/wire"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/pki"
	"github.com/outpost-edge/outpost/testing/syncbuf"
)

const testSecret = "endpoint-test-secret-0123456789abcdefghijklmnop"

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// agent is one endpoint served over real TLS on loopback.
type agent struct {
	t    *testing.T
	ca   *pki.CA
	rt   *endpointtest.Runtime
	url  string
	logs *syncbuf.Buffer
}

func startAgent(t *testing.T) *agent {
	t.Helper()
	rt := endpointtest.New()
	a := startAgentWith(t, rt)
	a.rt = rt
	return a
}

// startAgentWith serves an endpoint in front of rt.
func startAgentWith(t *testing.T, rt Runtime) *agent {
	t.Helper()
	ca, err := pki.DeriveCA(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.IssueNodeCert("edge-1", []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(tWriter{t}, logs), &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ln, TLSConfig(ca.Pool(), cert), New(Config{Runtime: rt, Logger: log, NodeName: "edge-1"}), log)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &agent{t: t, ca: ca, url: "https://" + ln.Addr().String(), logs: logs}
}

// client returns an HTTP client presenting cert (none when cert is nil);
// h2 chooses HTTP/2 or HTTP/1.1.
func (a *agent) client(cert *tls.Certificate, h2 bool) *http.Client {
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: a.ca.Pool(), ServerName: "edge-1"}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: h2}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	a.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func (a *agent) serverClient(h2 bool) *http.Client {
	cert, err := a.ca.IssueClientCert("s1", pki.ServerOU, time.Hour)
	if err != nil {
		a.t.Fatal(err)
	}
	return a.client(&cert, h2)
}

func do(t *testing.T, hc *http.Client, method, url string, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// wantStatus checks a Status reply's code and message.
func wantStatus(t *testing.T, code int, body string, wantCode int, wantMsg string) {
	t.Helper()
	var st api.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("reply %d is not a Status: %q", code, body)
	}
	if code != wantCode || int(st.Code) != wantCode || st.Message != wantMsg || st.Kind != "Status" {
		t.Fatalf("got %d %q (status code %d), want %d %q", code, st.Message, st.Code, wantCode, wantMsg)
	}
}

func TestLogs(t *testing.T) {
	a := startAgent(t)
	hc := a.serverClient(true)
	old := a.rt.AddContainer("default", "web", "app", 0)
	a.rt.Log(old, "first life")
	a.rt.Exit(old, 1)
	cur := a.rt.AddContainer("default", "web", "app", 1)
	a.rt.Log(cur, "one", "two", "three")
	a.rt.AddContainer("default", "web", "sidecar", 0)
	a.rt.AddContainer("other", "web", "app", 5)

	base := a.url + "/containerLogs/default/web/app"
	for _, tc := range []struct{ name, query, want string }{
		{"all of the current attempt", "", "one\ntwo\nthree\n"},
		{"tail", "?tailLines=2", "two\nthree\n"},
		{"tail beyond the start", "?tailLines=10", "one\ntwo\nthree\n"},
		{"timestamps", "?tailLines=1&timestamps=true", "2026-01-02T03:04:05Z three\n"},
		{"previous", "?previous=true", "first life\n"},
	} {
		code, body := do(t, hc, "GET", base+tc.query, nil)
		if code != http.StatusOK || body != tc.want {
			t.Errorf("%s: got %d %q, want 200 %q", tc.name, code, body, tc.want)
		}
	}

	code, body := do(t, hc, "GET", a.url+"/containerLogs/default/web/nope", nil)
	wantStatus(t, code, body, http.StatusNotFound, "container nope of pod default/web is not on this node")
	code, body = do(t, hc, "GET", a.url+"/containerLogs/default/web/sidecar?previous=true", nil)
	wantStatus(t, code, body, http.StatusBadRequest, `previous terminated container "sidecar" in pod "web" not found`)
	code, body = do(t, hc, "GET", base+"?tailLines=-3", nil)
	wantStatus(t, code, body, http.StatusBadRequest, `invalid value "-3" for query parameter tailLines: want a whole number of lines, 0 or more`)
	code, body = do(t, hc, "GET", base+"?follow=maybe", nil)
	wantStatus(t, code, body, http.StatusBadRequest, `invalid value "maybe" for query parameter follow: want true or false`)
	code, body = do(t, hc, "POST", base, nil)
	wantStatus(t, code, body, http.StatusMethodNotAllowed, "POST is not supported on /containerLogs/default/web/app; use GET")
	code, body = do(t, hc, "GET", a.url+"/pods", nil)
	wantStatus(t, code, body, http.StatusNotFound, "the agent does not serve /pods")
	if code, body := do(t, hc, "GET", a.url+"/healthz", nil); code != 200 || body != "ok" {
		t.Errorf("healthz: %d %q", code, body)
	}
}

// A follow streams each line as it is written and ends when the
// container exits.
func TestLogsFollow(t *testing.T) {
	for _, h2 := range []bool{true, false} {
		t.Run(map[bool]string{true: "http2", false: "http1"}[h2], func(t *testing.T) {
			a := startAgent(t)
			id := a.rt.AddContainer("default", "web", "app", 0)
			a.rt.Log(id, "before")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", a.url+"/containerLogs/default/web/app?follow=true", nil)
			resp, err := a.serverClient(h2).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			readLine := func(want string) {
				t.Helper()
				line, err := br.ReadString('\n')
				if err != nil || line != want {
					t.Fatalf("read %q, %v; want %q", line, err, want)
				}
			}
			readLine("before\n")
			a.rt.Log(id, "after")
			readLine("after\n")
			a.rt.Log(id, "last")
			a.rt.Exit(id, 0)
			readLine("last\n")
			if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
				t.Fatalf("after exit: %q, %v; want the stream to end", rest, err)
			}
		})
	}
}

// execReq starts an exec and returns the reply and stdin's writer.
func execReq(t *testing.T, hc *http.Client, url string, stdin bool) (*http.Response, *io.PipeWriter) {
	t.Helper()
	var body io.Reader
	var pw *io.PipeWriter
	if stdin {
		var pr *io.PipeReader
		pr, pw = io.Pipe()
		body = pr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	// A stream that stalls fails the test at the deadline instead of
	// hanging it: both directions are closed.
	if pw != nil {
		context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", url, body)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	context.AfterFunc(ctx, func() { resp.Body.Close() })
	return resp, pw
}

func TestExec(t *testing.T) {
	a := startAgent(t)
	hc := a.serverClient(true)
	a.rt.AddContainer("default", "web", "app", 0)
	stopped := a.rt.AddContainer("default", "web", "done", 0)
	a.rt.Exit(stopped, 0)
	base := a.url + "/exec/default/web/app"

	resp, _ := execReq(t, hc, base+"?command=echo&command=hello&command=world", false)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != wire.ContentTypeExec {
		t.Fatalf("echo: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var out, errb bytes.Buffer
	st, err := wire.ReadFrames(resp.Body, &out, &errb)
	if err != nil || st != (wire.ExitStatus{ExitCode: 0}) || out.String() != "hello world\n" || errb.Len() != 0 {
		t.Fatalf("echo: %+v %v stdout %q stderr %q", st, err, out.String(), errb.String())
	}

	resp, _ = execReq(t, hc, base+"?command=fail&command=3&command=no+such+file", false)
	out.Reset()
	st, err = wire.ReadFrames(resp.Body, &out, &errb)
	if err != nil || st.ExitCode != 3 || errb.String() != "no such file\n" || out.Len() != 0 {
		t.Fatalf("fail: %+v %v stdout %q stderr %q", st, err, out.String(), errb.String())
	}

	resp, _ = execReq(t, hc, base+"?command=nonexistent", false)
	st, err = wire.ReadFrames(resp.Body, nil, nil)
	if err != nil || st.ExitCode != -1 || !strings.Contains(st.Error, `exec: "nonexistent": executable file not found in $PATH`) {
		t.Fatalf("missing command: %+v %v", st, err)
	}

	code, body := do(t, hc, "POST", base, nil)
	wantStatus(t, code, body, http.StatusBadRequest, "you must specify at least one command for the container")
	code, body = do(t, hc, "POST", a.url+"/exec/default/web/done?command=echo", nil)
	wantStatus(t, code, body, http.StatusBadRequest, "container done of pod default/web is not running (state Exited)")
	code, body = do(t, hc, "POST", a.url+"/exec/default/nope/app?command=echo", nil)
	wantStatus(t, code, body, http.StatusNotFound, "container app of pod default/nope is not on this node")
	code, body = do(t, hc, "POST", base+"?command=echo&stdin=yes", nil)
	wantStatus(t, code, body, http.StatusBadRequest, `invalid value "yes" for query parameter stdin: want true or false`)
}

// stdin and stdout flow at the same time: a line sent is echoed back
// before stdin is closed, over HTTP/2 and over HTTP/1.1.
func TestExecFullDuplex(t *testing.T) {
	for _, h2 := range []bool{true, false} {
		t.Run(map[bool]string{true: "http2", false: "http1"}[h2], func(t *testing.T) {
			a := startAgent(t)
			a.rt.AddContainer("default", "web", "app", 0)
			resp, stdin := execReq(t, a.serverClient(h2), a.url+"/exec/default/web/app?command=cat&stdin=true", true)
			if resp.StatusCode != 200 {
				t.Fatalf("cat: %d", resp.StatusCode)
			}
			pr, pw := io.Pipe()
			done := make(chan error, 1)
			var st wire.ExitStatus
			go func() {
				var err error
				st, err = wire.ReadFrames(resp.Body, pw, io.Discard)
				pw.CloseWithError(err)
				done <- err
			}()
			br := bufio.NewReader(pr)
			for _, line := range []string{"ping\n", "pong\n"} {
				if _, err := io.WriteString(stdin, line); err != nil {
					t.Fatal(err)
				}
				got, err := br.ReadString('\n')
				if err != nil || got != line {
					t.Fatalf("echoed %q, %v; want %q", got, err, line)
				}
			}
			stdin.Close()
			if _, err := io.ReadAll(br); err != nil {
				t.Fatalf("stdout after stdin closed: %v", err)
			}
			if err := <-done; err != nil || st.ExitCode != 0 || st.Error != "" {
				t.Fatalf("exit: %+v %v", st, err)
			}
		})
	}
}

func TestImportImages(t *testing.T) {
	a := startAgent(t)
	hc := a.serverClient(true)
	archive := make([]byte, 3<<20+17)
	if _, err := rand.Read(archive); err != nil {
		t.Fatal(err)
	}
	copy(archive, "demo\n")
	code, body := do(t, hc, "POST", a.url+"/images", bytes.NewReader(archive))
	if code != 200 {
		t.Fatalf("import: %d %s", code, body)
	}
	var list wire.ImageList
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != wire.KindImageList || len(list.Images) != 1 || list.Images[0].Names[0] != "example.local/demo:1" || list.Images[0].Size != int64(len(archive)) {
		t.Fatalf("reply: %+v", list)
	}
	sum := sha256.Sum256(archive)
	got := a.rt.Imports()
	if len(got) != 1 || got[0].Size != int64(len(archive)) || got[0].SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("runtime got %+v, want one archive of %d bytes with the sent SHA-256", got, len(archive))
	}
	code, body = do(t, hc, "POST", a.url+"/images", strings.NewReader("bad archive"))
	wantStatus(t, code, body, http.StatusBadRequest, "image import failed on node edge-1: archive is not a tar: unexpected EOF")
}

// Only servers get in: no certificate, a node's, a user's, or one of
// another CA are refused in the handshake, and nothing reaches the
// runtime.
func TestRefusesNonServers(t *testing.T) {
	a := startAgent(t)
	nodeCert, err := a.ca.IssueNodeCert("edge-2", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	userCert, err := a.ca.IssueClientCert("alice", "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	otherCA, err := pki.DeriveCA("another-cluster-secret-0123456789abcdefghijkl")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := otherCA.IssueClientCert("s1", pki.ServerOU, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for name, cert := range map[string]*tls.Certificate{"no certificate": nil, "node": &nodeCert, "user": &userCert, "other CA": &foreign} {
		for _, h2 := range []bool{true, false} {
			req, _ := http.NewRequest("POST", a.url+"/images", strings.NewReader("x\n"))
			resp, err := a.client(cert, h2).Do(req)
			if err == nil {
				resp.Body.Close()
				t.Errorf("%s (h2 %v): got %d, want a refused handshake", name, h2, resp.StatusCode)
				continue
			}
			t.Logf("%s (h2 %v): refused: %v", name, h2, err)
		}
	}
	if n := len(a.rt.Imports()); n != 0 {
		t.Fatalf("%d imports reached the runtime", n)
	}
	// Refused for the right reasons, as the agent logged them.
	logs := a.logs.String()
	for _, want := range []string{
		"client didn't provide a certificate",
		`certificate \"edge-2\" lacks organizational unit \"outpost-server\"`,
		`certificate \"alice\" lacks organizational unit \"outpost-server\"`,
		"certificate signed by unknown authority",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the agent's log does not say %q", want)
		}
	}
	// The control: a server's certificate gets in.
	if code, body := do(t, a.serverClient(false), "POST", a.url+"/images", strings.NewReader("x\n")); code != 200 {
		t.Fatalf("server: %d %s", code, body)
	}
}

func TestServeNeedsTLS(t *testing.T) {
	if err := Serve(context.Background(), nil, nil, nil, nil); !errors.Is(err, ErrNoTLS) {
		t.Fatalf("Serve without TLS: %v", err)
	}
}
