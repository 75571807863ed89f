package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/agent/endpoint"
	"github.com/outpost-edge/outpost/agent/endpoint/endpointtest"
	"github.com/outpost-edge/outpost/agent/endpoint/wire"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/pki"
)

// streamEnv is one server and one agent endpoint (fake runtime) on
// loopback, with node edge-1 pointing at the agent.
type streamEnv struct {
	t     *testing.T
	s     *Server
	c     *tc
	rt    *endpointtest.Runtime
	agent string // host:port
}

func startStreamEnv(t *testing.T) *streamEnv {
	t.Helper()
	s := startServer(t, testConfig(t))
	c := admin(t, s)
	e := &streamEnv{t: t, s: s, c: c, rt: endpointtest.New()}
	e.agent = startTestAgent(t, s.CA(), "edge-1", e.rt)
	e.node("edge-1", e.agent)
	return e
}

// startTestAgent serves an agent endpoint with a certificate for name.
func startTestAgent(t *testing.T, ca *pki.CA, name string, rt *endpointtest.Runtime) string {
	t.Helper()
	return startTestAgentCert(t, ca, rt, func() (tls.Certificate, error) {
		return ca.IssueNodeCert(name, []string{"127.0.0.1"}, time.Hour)
	})
}

// startTestAgentCert serves an agent endpoint with the certificate issue
// makes.
func startTestAgentCert(t *testing.T, ca *pki.CA, rt *endpointtest.Runtime, issue func() (tls.Certificate, error)) string {
	t.Helper()
	return serveTestAgent(t, ca, endpoint.Config{Runtime: rt}, issue)
}

// serveTestAgent serves an agent endpoint configured as cfg (its Logger
// and NodeName are filled in) with the certificate issue makes, and
// returns its address.
func serveTestAgent(t *testing.T, ca *pki.CA, cfg endpoint.Config, issue func() (tls.Certificate, error)) string {
	t.Helper()
	cert, err := issue()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	name := "agent"
	if leaf, err := x509.ParseCertificate(cert.Certificate[0]); err == nil {
		name = leaf.Subject.CommonName
	}
	log := testLogger(t).With("agent", name)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		cfg.Logger, cfg.NodeName = log, name
		done <- endpoint.Serve(ctx, ln, endpoint.TLSConfig(ca.Pool(), cert), endpoint.New(cfg), log)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent %s: %v", name, err)
		}
	})
	return ln.Addr().String()
}

// node registers a Node whose agent listens at addr ("" for none).
func (e *streamEnv) node(name, addr string) {
	e.t.Helper()
	e.c.must(http.StatusCreated, "POST", "/api/v1/nodes", map[string]any{"metadata": map[string]any{"name": name}})
	if addr == "" {
		return
	}
	host, port, _ := net.SplitHostPort(addr)
	e.c.must(http.StatusOK, "PUT", "/api/v1/nodes/"+name+"/status", map[string]any{
		"metadata": map[string]any{"name": name},
		"status": map[string]any{
			"addresses":       []any{map[string]any{"type": "Hostname", "address": "no-such-host.invalid"}, map[string]any{"type": "InternalIP", "address": host}},
			"daemonEndpoints": map[string]any{"kubeletEndpoint": map[string]any{"Port": json.Number(port)}},
		},
	})
}

// pod creates pod ns/name with containers, bound to node ("" unbound).
func (e *streamEnv) pod(ns, name, node string, containers ...string) {
	e.t.Helper()
	var cs []any
	for _, c := range containers {
		cs = append(cs, map[string]any{"name": c, "image": "example.local/app:1"})
	}
	spec := map[string]any{"containers": cs}
	if node != "" {
		spec["nodeName"] = node
	}
	e.c.must(http.StatusCreated, "POST", "/api/v1/namespaces/"+ns+"/pods", map[string]any{
		"metadata": map[string]any{"name": name}, "spec": spec,
	})
}

// open sends a request through the API server and returns the live
// reply; h2 picks HTTP/2 instead of the helpers' HTTP/1.1.
func (e *streamEnv) open(ctx context.Context, token, method, path string, body io.Reader, h2 bool) *http.Response {
	e.t.Helper()
	hc := e.c.hc
	if h2 {
		cfg, err := pki.ClientTLSConfig(e.s.CA().CertPEM())
		if err != nil {
			e.t.Fatal(err)
		}
		tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
		e.t.Cleanup(tr.CloseIdleConnections)
		hc = &http.Client{Transport: tr}
	}
	req, err := http.NewRequestWithContext(ctx, method, e.s.URL()+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// wantError checks a Status reply.
func wantError(t *testing.T, r reply, code int, msg string) {
	t.Helper()
	st := r.status()
	if r.code != code || st.Message != msg {
		t.Fatalf("got %d %q, want %d %q", r.code, st.Message, code, msg)
	}
}

func TestPodLogsThroughAgent(t *testing.T) {
	e := startStreamEnv(t)
	e.pod("default", "web", "edge-1", "app")
	old := e.rt.AddContainer("default", "web", "app", 0)
	e.rt.Log(old, "crashed")
	e.rt.Exit(old, 2)
	cur := e.rt.AddContainer("default", "web", "app", 1)
	e.rt.Log(cur, "one", "two", "three")

	base := "/api/v1/namespaces/default/pods/web/log"
	for _, tc := range []struct{ query, want string }{
		{"", "one\ntwo\nthree\n"},
		{"?container=app&tailLines=1", "three\n"},
		{"?timestamps=true&tailLines=2", "2026-01-02T03:04:05Z two\n2026-01-02T03:04:05Z three\n"},
		{"?previous=true", "crashed\n"},
	} {
		r := e.c.must(http.StatusOK, "GET", base+tc.query, nil)
		if string(r.body) != tc.want || r.header.Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Errorf("%s: %q (%s), want %q", tc.query, r.body, r.header.Get("Content-Type"), tc.want)
		}
	}

	// follow streams lines as they come and ends when the container
	// exits, over HTTP/1.1 and HTTP/2.
	for _, h2 := range []bool{false, true} {
		id := e.rt.AddContainer("default", "web", "app", map[bool]int{false: 2, true: 3}[h2])
		e.rt.Log(id, "start")
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		resp := e.open(ctx, e.c.token, "GET", base+"?follow=true", nil, h2)
		context.AfterFunc(ctx, func() { resp.Body.Close() })
		br := bufio.NewReader(resp.Body)
		for _, line := range []string{"start", "live", "end"} {
			got, err := br.ReadString('\n')
			if err != nil || got != line+"\n" {
				t.Fatalf("h2 %v: read %q, %v; want %q", h2, got, err, line)
			}
			switch line {
			case "start":
				e.rt.Log(id, "live")
			case "live":
				e.rt.Log(id, "end")
				e.rt.Exit(id, 0)
			}
		}
		if rest, err := io.ReadAll(br); err != nil || len(rest) > 0 {
			t.Fatalf("h2 %v: after the exit: %q, %v", h2, rest, err)
		}
		cancel()
	}

	wantError(t, e.c.do("GET", base+"?container=nope", nil), 400, "container nope is not valid for pod web")
	wantError(t, e.c.do("GET", base+"?tailLines=x", nil), 400, `invalid value "x" for query parameter tailLines: want a whole number of lines, 1 or more`)
	wantError(t, e.c.do("GET", base+"?follow=sure", nil), 400, `invalid value "sure" for query parameter follow: want true or false`)
	wantError(t, e.c.do("GET", "/api/v1/namespaces/default/pods/ghost/log", nil), 404, `pods "ghost" not found`)
	wantError(t, e.c.do("POST", base, nil), 405, "POST is not supported on pods web/log")

	e.pod("default", "two", "edge-1", "main", "side")
	wantError(t, e.c.do("GET", "/api/v1/namespaces/default/pods/two/log", nil), 400, "a container name must be specified for pod two, choose one of: [main side]")
	// In the spec but not on the node: the agent's 404 comes through.
	wantError(t, e.c.do("GET", "/api/v1/namespaces/default/pods/two/log?container=side", nil), 404, "container side of pod default/two is not on this node")
}

func TestPodExecThroughAgent(t *testing.T) {
	e := startStreamEnv(t)
	e.pod("default", "web", "edge-1", "app")
	e.rt.AddContainer("default", "web", "app", 0)
	base := "/api/v1/namespaces/default/pods/web/exec"

	for _, h2 := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		resp := e.open(ctx, e.c.token, "POST", base+"?command=echo&command=hi&command=there", nil, h2)
		var out, errb bytes.Buffer
		st, err := wire.ReadFrames(resp.Body, &out, &errb)
		if resp.StatusCode != 200 || err != nil || st.ExitCode != 0 || out.String() != "hi there\n" {
			t.Fatalf("h2 %v echo: %d %+v %v %q", h2, resp.StatusCode, st, err, out.String())
		}
		resp = e.open(ctx, e.c.token, "POST", base+"?container=app&command=fail&command=42&command=oops", nil, h2)
		out.Reset()
		st, err = wire.ReadFrames(resp.Body, &out, &errb)
		if err != nil || st.ExitCode != 42 || errb.String() != "oops\n" || out.Len() != 0 {
			t.Fatalf("h2 %v fail: %+v %v stdout %q stderr %q", h2, st, err, out.String(), errb.String())
		}
		errb.Reset()

		// stdin: each line comes back before stdin is closed, so both
		// directions flow at once through the server.
		pr, pw := io.Pipe()
		context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
		resp = e.open(ctx, e.c.token, "POST", base+"?command=cat&stdin=true", pr, h2)
		context.AfterFunc(ctx, func() { resp.Body.Close() })
		outR, outW := io.Pipe()
		done := make(chan wire.ExitStatus, 1)
		go func() {
			st, err := wire.ReadFrames(resp.Body, outW, io.Discard)
			outW.CloseWithError(err)
			done <- st
		}()
		br := bufio.NewReader(outR)
		for _, line := range []string{"ping\n", "pong\n"} {
			if _, err := io.WriteString(pw, line); err != nil {
				t.Fatal(err)
			}
			if got, err := br.ReadString('\n'); err != nil || got != line {
				t.Fatalf("h2 %v: echoed %q, %v; want %q", h2, got, err, line)
			}
		}
		pw.Close()
		if _, err := io.ReadAll(br); err != nil {
			t.Fatalf("h2 %v: after stdin closed: %v", h2, err)
		}
		if st := <-done; st.ExitCode != 0 || st.Error != "" {
			t.Fatalf("h2 %v: cat exit %+v", h2, st)
		}

		// A command that ends while stdin is still open (`exec -i` from
		// a terminal nobody types in) ends the exec: the exit status
		// arrives without waiting for stdin.
		idle, idleW := io.Pipe()
		context.AfterFunc(ctx, func() { idleW.CloseWithError(ctx.Err()) })
		resp = e.open(ctx, e.c.token, "POST", base+"?command=echo&command=bye&stdin=true", idle, h2)
		out.Reset()
		if st, err := wire.ReadFrames(resp.Body, &out, io.Discard); err != nil || st.ExitCode != 0 || out.String() != "bye\n" {
			t.Fatalf("h2 %v: echo with stdin open: %+v %v %q", h2, st, err, out.String())
		}
		if ctx.Err() != nil {
			t.Fatalf("h2 %v: the exec outlived its deadline", h2)
		}
		cancel()
	}

	wantError(t, e.c.do("POST", base, nil), 400, "you must specify at least one command for the container")
	wantError(t, e.c.do("POST", base+"?command=ls&stdin=maybe", nil), 400, `invalid value "maybe" for query parameter stdin: want true or false`)
	wantError(t, e.c.do("GET", base+"?command=ls", nil), 405, "GET is not supported on pods web/exec; use POST")
}

// countingReader yields n pseudo-random bytes without holding them.
type countingReader struct {
	left  int64
	state uint64
	read  atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), c.left))
	for i := range n {
		c.state = c.state*6364136223846793005 + 1442695040888963407
		p[i] = byte(c.state >> 56)
	}
	c.left -= int64(n)
	c.read.Add(int64(n))
	return n, nil
}

func TestNodeImagesThroughAgent(t *testing.T) {
	e := startStreamEnv(t)
	small := []byte("demo\nnot really a tar, but the fake does not mind")
	r := e.c.must(http.StatusOK, "POST", "/apis/outpost.io/v1/nodes/edge-1/images", small)
	var list wire.ImageList
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Images) != 1 || list.Images[0].Names[0] != "example.local/demo:1" {
		t.Fatalf("reply %s: %v", r.body, err)
	}
	sum := sha256.Sum256(small)
	if got := e.rt.Imports(); len(got) != 1 || got[0].SHA256 != hex.EncodeToString(sum[:]) || got[0].Size != int64(len(small)) {
		t.Fatalf("runtime got %+v", got)
	}
	wantError(t, e.c.do("POST", "/apis/outpost.io/v1/nodes/edge-1/images", "bad tar"), 400, "image import failed on node edge-1: archive is not a tar: unexpected EOF")
	wantError(t, e.c.do("POST", "/apis/outpost.io/v1/nodes/edge-9/images", "x"), 404, `nodes "edge-9" not found`)
	wantError(t, e.c.do("GET", "/apis/outpost.io/v1/nodes/edge-1/images", nil), 405, "GET is not supported on nodes edge-1/images; use POST")
}

// A 100 MiB archive streams through the server and the agent: the heap
// never grows by anything near the archive's size.
func TestNodeImagesBoundedMemory(t *testing.T) {
	e := startStreamEnv(t)
	const size = 100 << 20
	src := &countingReader{left: size, state: 1}
	h := sha256.New()
	body := io.TeeReader(src, h)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp := e.open(ctx, e.c.token, "POST", "/apis/outpost.io/v1/nodes/edge-1/images", body, true)
	reply, _ := io.ReadAll(resp.Body)
	close(stop)
	<-sampled
	if resp.StatusCode != 200 {
		t.Fatalf("import: %d %s", resp.StatusCode, reply)
	}
	got := e.rt.Imports()
	if len(got) != 1 || got[0].Size != size || got[0].SHA256 != hex.EncodeToString(h.Sum(nil)) {
		t.Fatalf("runtime got %+v, want %d bytes with the sent SHA-256", got, size)
	}
	grew := int64(peak.Load()) - int64(base)
	t.Logf("heap in use grew by at most %d KiB while 100 MiB passed", grew>>10)
	if grew > 32<<20 {
		t.Fatalf("heap grew by %d MiB while streaming a 100 MiB archive: the body is being buffered", grew>>20)
	}
}

func TestStreamsAuthorization(t *testing.T) {
	e := startStreamEnv(t)
	e.c.must(http.StatusCreated, "POST", "/api/v1/namespaces", map[string]any{"metadata": map[string]any{"name": "team-a"}})
	e.pod("default", "web", "edge-1", "app")
	e.pod("team-a", "mine", "edge-1", "app")
	e.rt.AddContainer("team-a", "mine", "app", 0)
	id := e.rt.AddContainer("default", "web", "app", 0)
	e.rt.Log(id, "secret")
	dev := e.c.as(addToken(t, e.c, api.TokenSpec{Role: api.RoleDeveloper, Namespaces: []string{"team-a"}}))
	node := e.c.as(addToken(t, e.c, api.TokenSpec{Role: api.RoleNode, NodeName: "edge-1"}))

	r := dev.must(http.StatusOK, "GET", "/api/v1/namespaces/team-a/pods/mine/log", nil)
	if len(r.body) != 0 {
		t.Fatalf("own pod's log: %q", r.body)
	}
	wantError(t, dev.do("GET", "/api/v1/namespaces/default/pods/web/log", nil), 403,
		`pods "web" is forbidden: User "token:`+tokenID(dev.token)+`" cannot get resource "pods/log" in namespace "default"`)
	wantError(t, dev.do("POST", "/api/v1/namespaces/default/pods/web/exec?command=echo", nil), 403,
		`pods "web" is forbidden: User "token:`+tokenID(dev.token)+`" cannot create resource "pods/exec" in namespace "default"`)
	wantError(t, dev.do("POST", "/apis/outpost.io/v1/nodes/edge-1/images", "x"), 403,
		`nodes "edge-1" is forbidden: User "token:`+tokenID(dev.token)+`" cannot create resource "nodes/images" at the cluster scope`)
	resp := e.open(context.Background(), dev.token, "POST", "/api/v1/namespaces/team-a/pods/mine/exec?command=echo&command=ok", nil, false)
	var out bytes.Buffer
	if st, err := wire.ReadFrames(resp.Body, &out, nil); err != nil || st.ExitCode != 0 || out.String() != "ok\n" {
		t.Fatalf("developer exec in its namespace: %+v %v %q", st, err, out.String())
	}

	for _, tc := range []struct{ method, path, what string }{
		{"GET", "/api/v1/namespaces/default/pods/web/log", `cannot get resource "pods/log" in namespace "default"`},
		{"POST", "/api/v1/namespaces/default/pods/web/exec?command=echo", `cannot create resource "pods/exec" in namespace "default"`},
		{"POST", "/apis/outpost.io/v1/nodes/edge-1/images", `cannot create resource "nodes/images" at the cluster scope`},
	} {
		r := node.do(tc.method, tc.path, nil)
		if r.code != 403 || !strings.Contains(r.status().Message, `User "system:node:edge-1" `+tc.what) {
			t.Errorf("node %s %s: %d %s", tc.method, tc.path, r.code, r.body)
		}
	}
	if n := len(e.rt.Imports()); n != 0 {
		t.Fatalf("%d refused imports reached the runtime", n)
	}
}

// A user who goes away (Ctrl-C on a follow or an exec) ends the agent's
// side too: nothing keeps running on the node for nobody.
func TestStreamsEndWithTheCaller(t *testing.T) {
	e := startStreamEnv(t)
	e.pod("default", "web", "edge-1", "app")
	e.rt.AddContainer("default", "web", "app", 0)
	for _, tc := range []struct{ method, path string }{
		{"GET", "/api/v1/namespaces/default/pods/web/log?follow=true"},
		{"POST", "/api/v1/namespaces/default/pods/web/exec?command=sleep"},
	} {
		for _, h2 := range []bool{false, true} {
			ctx, cancel := context.WithCancel(context.Background())
			resp := e.open(ctx, e.c.token, tc.method, tc.path, nil, h2)
			if resp.StatusCode != 200 {
				t.Fatalf("%s: %d", tc.path, resp.StatusCode)
			}
			waitFor(t, 10*time.Second, "the agent to be streaming", func() bool { return e.rt.Active() == 1 })
			cancel()
			waitFor(t, 10*time.Second, "the agent's side to end after the caller left", func() bool { return e.rt.Active() == 0 })
		}
	}
}

// tokenID is the id half of a bearer token.
func tokenID(tok string) string {
	id, _, _ := strings.Cut(tok, ".")
	return id
}

func TestStreamsBadTargets(t *testing.T) {
	e := startStreamEnv(t)
	e.pod("default", "pending", "", "app")
	wantError(t, e.c.do("GET", "/api/v1/namespaces/default/pods/pending/log", nil), 400, "pod default/pending is not bound to a node yet: it has no containers to reach")

	e.node("bare", "")
	e.pod("default", "on-bare", "bare", "app")
	wantError(t, e.c.do("GET", "/api/v1/namespaces/default/pods/on-bare/log", nil), 503, "node bare reports no agent endpoint (status.daemonEndpoints.kubeletEndpoint.Port is unset)")
	wantError(t, e.c.do("POST", "/apis/outpost.io/v1/nodes/bare/images", "x"), 503, "node bare reports no agent endpoint (status.daemonEndpoints.kubeletEndpoint.Port is unset)")

	e.pod("default", "lost", "edge-9", "app")
	wantError(t, e.c.do("GET", "/api/v1/namespaces/default/pods/lost/log", nil), 503, "node edge-9 is not registered: its agent cannot be reached")

	// A node whose agent is down: its port is closed.
	closed := closedAddr(t)
	e.node("down", closed)
	e.pod("default", "on-down", "down", "app")
	r := e.c.do("POST", "/api/v1/namespaces/default/pods/on-down/exec?command=ls", nil)
	if want := "cannot reach the agent of node down at " + closed + ": "; r.code != 503 || !strings.HasPrefix(r.status().Message, want) || !strings.Contains(r.status().Message, "connection refused") {
		t.Fatalf("agent down: %d %q, want 503 %q...connection refused", r.code, r.status().Message, want)
	}

	// A node that claims another node's agent: the certificate names
	// edge-1, so the server refuses to talk to it.
	e.node("impostor", e.agent)
	e.pod("default", "on-impostor", "impostor", "app")
	r = e.c.do("GET", "/api/v1/namespaces/default/pods/on-impostor/log", nil)
	if r.code != 503 || !strings.Contains(r.status().Message, "cannot reach the agent of node impostor at "+e.agent) || !strings.Contains(r.status().Message, "certificate is valid for edge-1, not impostor") {
		t.Fatalf("impostor: %d %q", r.code, r.status().Message)
	}
	// Worse: edge-1's certificate also lists the name "sly" (the join
	// flow puts the node's hosts in it). The name check passes; the
	// common name does not.
	slyAgent := startTestAgentCert(t, e.s.CA(), e.rt, func() (tls.Certificate, error) {
		return e.s.CA().IssueNodeCert("edge-1", []string{"127.0.0.1", "sly"}, time.Hour)
	})
	e.node("sly", slyAgent)
	e.pod("default", "on-sly", "sly", "app")
	r = e.c.do("GET", "/api/v1/namespaces/default/pods/on-sly/log", nil)
	if r.code != 503 || !strings.Contains(r.status().Message, `the agent's certificate is for "edge-1" (units [outpost-node]), not node "sly"`) {
		t.Fatalf("sly: %d %q", r.code, r.status().Message)
	}
}

// A container the node never started has no logs to show: the reply says
// why, as kubectl's does, instead of asking the agent.
func TestWaitingToStart(t *testing.T) {
	pod := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "nope"}, Status: api.PodStatus{ContainerStatuses: []api.ContainerStatus{
		{Name: "c", State: api.ContainerState{Waiting: &api.ContainerStateWaiting{Reason: "ErrImagePull", Message: "no such image"}}},
		{Name: "crashing", ContainerID: "containerd://x", State: api.ContainerState{Waiting: &api.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}},
	}}}
	if got, want := waitingToStart(pod, "c"), `container "c" in pod "nope" is waiting to start: ErrImagePull: no such image`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// A container that ran (it has an ID) has logs, even while it waits
	// to be restarted.
	if got := waitingToStart(pod, "crashing"); got != "" {
		t.Errorf("crashing: %q", got)
	}
	if got := waitingToStart(pod, "other"); got != "" {
		t.Errorf("no status: %q", got)
	}
}
