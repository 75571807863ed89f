package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/pki"
)

// testSecret is a fixed cluster secret, so certificates and the admin
// token are reproducible between runs.
const testSecret = "test-cluster-secret-0123456789abcdefghijklmnop"

// testLogger sends logs to t.Log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// testConfig is a one-server cluster on loopback ports picked by the
// kernel, with raft timeouts short enough for tests.
func testConfig(t testing.TB) Config {
	dir := t.TempDir()
	return Config{
		ID:                 "s1",
		DataDir:            dir,
		APIAddr:            "127.0.0.1:0",
		RaftAddr:           "127.0.0.1:0",
		BootstrapExpect:    1,
		ClusterSecret:      testSecret,
		AdminConfigPath:    filepath.Join(dir, "admin.conf"),
		Logger:             testLogger(t),
		HeartbeatTimeout:   100 * time.Millisecond,
		ElectionTimeout:    100 * time.Millisecond,
		LeaderLeaseTimeout: 50 * time.Millisecond,
		CommitTimeout:      5 * time.Millisecond,
	}
}

// fixedPorts gives cfg loopback ports that were free a moment ago instead
// of port 0, so that the server can be restarted at the same raft address
// its peers know.
func fixedPorts(t testing.TB, cfg Config) Config {
	t.Helper()
	for _, a := range []*string{&cfg.APIAddr, &cfg.RaftAddr} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		*a = ln.Addr().String()
		ln.Close()
	}
	// The gossip port would otherwise be the fixed default.
	cfg.GossipAddr = "127.0.0.1:0"
	return cfg
}

// startServer starts a server and waits until it is ready. Unless the
// test asks for them, the leader runs no scheduler and no controllers:
// these tests check the API's own behaviour, writes included, and the
// loops' writes would mingle with theirs (testing/scenario covers them).
func startServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	s := startUnready(t, cfg)
	waitReady(t, s)
	return s
}

// startUnready starts a server as startServer does, without waiting until
// it is ready.
func startUnready(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Schedulers == nil {
		cfg.Schedulers = map[string]string{}
		cfg.DisableControllers = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// waitReady waits until s would answer /readyz with 200.
func waitReady(t testing.TB, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
}

// tc is a raw HTTP client for one server, so tests see codes and headers
// exactly as they were sent.
type tc struct {
	t     testing.TB
	s     *Server
	hc    *http.Client
	token string
}

func newTC(t testing.TB, s *Server, token string) *tc {
	t.Helper()
	tr := &http.Transport{}
	if !s.cfg.Insecure {
		tlsCfg, err := pki.ClientTLSConfig(s.CA().CertPEM())
		if err != nil {
			t.Fatal(err)
		}
		tr.TLSClientConfig = tlsCfg
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &tc{t: t, s: s, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}, token: token}
}

func (c *tc) as(token string) *tc {
	cp := *c
	cp.token = token
	return &cp
}

type reply struct {
	code   int
	header http.Header
	body   []byte
}

func (r reply) status() api.Status {
	var st api.Status
	_ = json.Unmarshal(r.body, &st)
	return st
}

func (r reply) String() string { return string(r.body) }

// do sends one request; body may be nil, a []byte, a string or a value to
// encode as JSON.
func (c *tc) do(method, path string, body any, hdr ...string) reply {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(withTypeMetaText(method, path, b))
	default:
		data, err := json.Marshal(withTypeMeta(method, path, b))
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, c.s.URL()+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: reading reply: %v", method, path, err)
	}
	return reply{code: resp.StatusCode, header: resp.Header, body: data}
}

// bodyResource is the resource whose objects a create or update of path
// carries; nil for other requests (and for bindings, whose body is a
// Binding).
func bodyResource(method, path string) *api.Resource {
	if method != http.MethodPost && method != http.MethodPut || strings.HasSuffix(path, "/binding") {
		return nil
	}
	var res *api.Resource
	for seg := range strings.SplitSeq(strings.SplitN(path, "?", 2)[0], "/") {
		if r := api.ResourceForPlural(seg); r != nil {
			res = r
		}
	}
	return res
}

// withTypeMetaText puts the kind and apiVersion in front of a JSON object
// given as a string that lacks them, leaving the rest byte for byte.
func withTypeMetaText(method, path, body string) string {
	res := bodyResource(method, path)
	var m map[string]json.RawMessage
	if res == nil || json.Unmarshal([]byte(body), &m) != nil {
		return body
	}
	if _, has := m["kind"]; has {
		return body
	}
	if _, has := m["apiVersion"]; has {
		return body
	}
	i := strings.Index(body, "{")
	head := fmt.Sprintf(`{"kind":%q,"apiVersion":%q`, res.Kind, res.APIVersion())
	if rest := strings.TrimSpace(body[i+1:]); rest != "}" {
		head += ","
	}
	return head + body[i+1:]
}

// withTypeMeta fills in the kind and apiVersion a create or update must
// carry, as every real client sends them, from the resource the path
// names, when a test's body (a struct, a map or a string) leaves them out.
// A body given as []byte goes as it is: that is how a test sends one
// without them.
func withTypeMeta(method, path string, body any) any {
	res := bodyResource(method, path)
	if res == nil {
		return body
	}
	if m, ok := body.(map[string]any); ok {
		if _, has := m["kind"]; has {
			return body
		}
		out := map[string]any{"kind": res.Kind, "apiVersion": res.APIVersion()}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	if o, ok := body.(api.Object); ok {
		if tm := o.GetTypeMeta(); tm.Kind == "" {
			data, err := api.Encode(o)
			if err == nil {
				return json.RawMessage(data)
			}
		}
	}
	return body
}

// must sends a request and fails the test unless the reply has code.
func (c *tc) must(code int, method, path string, body any) reply {
	c.t.Helper()
	r := c.do(method, path, body)
	if r.code != code {
		c.t.Fatalf("%s %s: got %d, want %d: %s", method, path, r.code, code, r.body)
	}
	return r
}

// admin is a client with the admin token.
func admin(t testing.TB, s *Server) *tc {
	return newTC(t, s, s.AdminConfig().Token)
}

// addToken stores a token with the given spec and returns its bearer
// value.
func addToken(t testing.TB, c *tc, spec api.TokenSpec) string {
	t.Helper()
	id, secret := auth.NewToken()
	spec.SecretHash = auth.HashSecret(secret)
	c.must(http.StatusCreated, "POST", "/apis/outpost.io/v1/tokens", &api.Token{
		ObjectMeta: api.ObjectMeta{Name: id},
		Spec:       spec,
	})
	return id + "." + secret
}

func decode[T any](t testing.TB, r reply) *T {
	t.Helper()
	v := new(T)
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %T from %s: %v", v, r.body, err)
	}
	return v
}

// appliedIndex is the store's applied index, the resourceVersion of the
// state; tests compare it before and after a refused write.
func appliedIndex(s *Server) uint64 { return s.Store().AppliedIndex() }

func podJSON(name string, labels map[string]string) map[string]any {
	md := map[string]any{"name": name}
	if labels != nil {
		md["labels"] = labels
	}
	return map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": md,
		"spec": map[string]any{
			"containers": []any{map[string]any{"name": "app", "image": "registry.local/app:1.0"}},
		},
	}
}
