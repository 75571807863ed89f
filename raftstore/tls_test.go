package raftstore

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

type testCA struct {
	cert *x509.Certificate
	key  ed25519.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue makes a certificate for a server, valid for both ends of a
// connection on 127.0.0.1.
func (ca *testCA) issue(t *testing.T, name string) tls.Certificate {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (ca *testCA) configs(t *testing.T, name string) (server, client *tls.Config) {
	c := ca.issue(t, name)
	return &tls.Config{Certificates: []tls.Certificate{c}, ClientCAs: ca.pool},
		&tls.Config{Certificates: []tls.Certificate{c}, RootCAs: ca.pool}
}

func TestMutualTLSCluster(t *testing.T) {
	ca := newTestCA(t, "outpost test CA")
	nodes := startCluster(t, 3, func(c *Config) {
		c.Insecure = false
		c.ServerTLS, c.ClientTLS = ca.configs(t, c.ID)
	})
	leader := waitLeader(t, nodes)
	idx := set(t, leader.node, "secure", "yes")
	for _, tn := range nodes {
		if err := tn.node.WaitApplied(ctxT(t, 5*time.Second), idx); err != nil {
			t.Fatal(err)
		}
		if v, _ := tn.fsm.get("secure"); v != "yes" {
			t.Fatalf("%s: secure = %q", tn.cfg.ID, v)
		}
	}
	f := followers(nodes, leader)[0]
	if _, err := f.node.ReadIndex(ctxT(t, 5*time.Second)); err != nil {
		t.Fatalf("ReadIndex over TLS: %v", err)
	}

	// Clients that cannot prove membership are turned away.
	rogue := newTestCA(t, "rogue CA")
	rs, rc := rogue.configs(t, "intruder")
	rc.RootCAs = ca.pool // trusts the cluster, but its own cert is foreign
	for name, cfg := range map[string]Config{
		"foreign client certificate": {BindAddr: "127.0.0.1:0", ServerTLS: rs, ClientTLS: rc},
		"plain TCP":                  {BindAddr: "127.0.0.1:0", Insecure: true},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := newMux(cfg, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = m.Close() }()
			c := newRPCClient(m)
			defer c.Close()
			var st Status
			err = c.call(ctxT(t, 2*time.Second), leader.cfg.BindAddr, rpcStatus, nil, &st)
			if err == nil {
				t.Fatalf("status RPC succeeded without a cluster certificate: %+v", st)
			}
		})
	}
}

func TestConfigValidation(t *testing.T) {
	ca := newTestCA(t, "ca")
	srv, cli := ca.configs(t, "x")
	base := func() Config {
		return Config{ID: "a", DataDir: t.TempDir(), BindAddr: "127.0.0.1:0", Insecure: true}
	}
	tests := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"ok", func(*Config) {}, ""},
		{"no data dir", func(c *Config) { c.DataDir = "" }, "DataDir: required"},
		{"no bind", func(c *Config) { c.BindAddr = "" }, "BindAddr: required"},
		{"bad bind", func(c *Config) { c.BindAddr = "nope" }, "BindAddr:"},
		{"bad join", func(c *Config) { c.Join = []string{"127.0.0.1:1", "x"} }, "Join[1]:"},
		{"expect without join", func(c *Config) { c.BootstrapExpect = 3 }, "Join: required"},
		{"negative expect", func(c *Config) { c.BootstrapExpect = -1 }, "BootstrapExpect: must be >= 0"},
		{"tls required", func(c *Config) { c.Insecure = false }, "ServerTLS: required"},
		{"client CA required", func(c *Config) {
			c.Insecure = false
			c.ServerTLS, c.ClientTLS = srv, cli.Clone()
			c.ClientTLS.RootCAs = nil
		}, "ClientTLS.RootCAs: required"},
		{"server CA required", func(c *Config) {
			c.Insecure = false
			c.ServerTLS, c.ClientTLS = srv.Clone(), cli
			c.ServerTLS.ClientCAs = nil
		}, "ServerTLS.ClientCAs: required"},
		{"lease above heartbeat", func(c *Config) {
			c.HeartbeatTimeout = 50 * time.Millisecond
			c.LeaderLeaseTimeout = 100 * time.Millisecond
		}, "LeaderLeaseTimeout:"},
		{"election below heartbeat", func(c *Config) {
			c.HeartbeatTimeout = 100 * time.Millisecond
			c.ElectionTimeout = 50 * time.Millisecond
		}, "ElectionTimeout:"},
		{"tiny heartbeat", func(c *Config) { c.HeartbeatTimeout = time.Millisecond }, "HeartbeatTimeout: must be at least 5ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.mod(&c)
			got, err := c.withDefaults()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got.HeartbeatTimeout != defaultHeartbeatTimeout || got.LeaderLeaseTimeout > got.HeartbeatTimeout || got.Logger == nil || got.CatchUpLag != defaultCatchUpLag {
					t.Errorf("defaults not applied: %+v", got)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

// TestCaughtUp is the promotion rule for a joining server (CPL-1: a
// replacement is promoted once it has caught up with the leader's log,
// within the configured lag).
func TestCaughtUp(t *testing.T) {
	tests := []struct {
		name                      string
		last, target, commit, lag uint64
		want                      bool
	}{
		{"exactly at the commit index", 100, 100, 100, 0, true},
		{"short of what was committed when asked", 99, 100, 100, 64, false},
		{"within the lag of a moving commit index", 150, 100, 200, 64, true},
		{"more than the lag behind", 135, 100, 200, 64, false},
		{"a larger lag promotes sooner", 135, 100, 200, 100, true},
		{"no lag needs the commit index", 199, 100, 200, 0, false},
	}
	for _, tt := range tests {
		if got := caughtUp(tt.last, tt.target, tt.commit, tt.lag); got != tt.want {
			t.Errorf("%s: caughtUp(last %d, target %d, commit %d, lag %d) = %v, want %v", tt.name, tt.last, tt.target, tt.commit, tt.lag, got, tt.want)
		}
	}
}

// warnCounter counts warn records whose message contains want.
type warnCounter struct {
	slog.Handler
	want string
	n    *atomic.Int32
}

func (h warnCounter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && strings.Contains(r.Message, h.want) {
		h.n.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

func (h warnCounter) WithAttrs(as []slog.Attr) slog.Handler {
	return warnCounter{h.Handler.WithAttrs(as), h.want, h.n}
}

func (h warnCounter) WithGroup(g string) slog.Handler {
	return warnCounter{h.Handler.WithGroup(g), h.want, h.n}
}

// A server started with another cluster secret has certificates of
// another CA. Joining or bootstrapping with it must say so, once at warn
// while it retries and in the error it ends with, not only "x509:
// certificate signed by unknown authority".
func TestForeignClusterCA(t *testing.T) {
	ours, theirs := newTestCA(t, "our CA"), newTestCA(t, "their CA")
	other := &testNode{cfg: testConfig(t, "other")}
	other.cfg.BootstrapExpect = 1
	other.cfg.Insecure = false
	other.cfg.ServerTLS, other.cfg.ClientTLS = theirs.configs(t, "other")
	if err := other.open(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.close(t) })
	addr := other.node.advertise

	for _, tt := range []struct {
		name string
		mod  func(*Config)
	}{
		{"join", func(c *Config) {}},
		{"bootstrap-expect", func(c *Config) { c.BootstrapExpect = 2 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, "new")
			cfg.Insecure = false
			cfg.ServerTLS, cfg.ClientTLS = ours.configs(t, "new")
			cfg.Join = []string{addr}
			tt.mod(&cfg)
			var warns atomic.Int32
			cfg.Logger = slog.New(warnCounter{cfg.Logger.Handler(), "another cluster CA", &warns})
			n, err := Open(ctxT(t, time.Second), cfg, newKV())
			if err == nil {
				n.Close()
				t.Fatal("a server with a foreign CA was joined")
			}
			want := "the server at " + addr + " has a certificate from a different cluster CA: is --cluster-secret the same on every server?"
			if !errors.Is(err, ErrForeignCA) || !strings.Contains(err.Error(), want) {
				t.Errorf("error %q\nwant ErrForeignCA saying %q", err, want)
			}
			if got := warns.Load(); got != 1 {
				t.Errorf("%d warnings about the foreign CA, want exactly 1 (the first failure)", got)
			}
		})
	}
}

// A server whose --insecure differs from the cluster's is refused with a
// message that names --insecure, not a bare EOF or a TLS record error
// (issue 9 item 10), both ways round.
func TestInsecureMismatchSaysWhy(t *testing.T) {
	ca := newTestCA(t, "cluster CA")
	for _, tt := range []struct {
		name               string
		clusterTLS, newTLS bool
	}{
		{"insecure server joins a TLS cluster", true, false},
		{"TLS server joins an insecure cluster", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			other := &testNode{cfg: testConfig(t, "other")}
			other.cfg.BootstrapExpect = 1
			other.cfg.Insecure = !tt.clusterTLS
			if tt.clusterTLS {
				other.cfg.ServerTLS, other.cfg.ClientTLS = ca.configs(t, "other")
			}
			if err := other.open(ctxT(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { other.close(t) })

			cfg := testConfig(t, "new")
			cfg.Insecure = !tt.newTLS
			if tt.newTLS {
				cfg.ServerTLS, cfg.ClientTLS = ca.configs(t, "new")
			}
			cfg.Join = []string{other.node.advertise}
			n, err := Open(ctxT(t, 2*time.Second), cfg, newKV())
			if err == nil {
				n.Close()
				t.Fatal("the server joined a cluster that disagrees on --insecure")
			}
			if !strings.Contains(err.Error(), "must agree on --insecure") {
				t.Errorf("error %q does not say that every server must agree on --insecure", err)
			}
		})
	}
}
