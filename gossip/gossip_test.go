package gossip

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var testKey = KeyFromSecret("test-cluster-secret-of-at-least-32-characters")

// safeWriter sends log lines to t.Log until the test ends; memberlist's
// goroutines may still log while a pool shuts down.
type safeWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *safeWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(b), "\n"))
	}
	return len(b), nil
}

func testLogger(t *testing.T) *slog.Logger {
	w := &safeWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// start starts a pool on loopback that the test closes at its end.
func start(t *testing.T, cfg Config) *Pool {
	t.Helper()
	if cfg.BindAddr == "" {
		cfg.BindAddr = "127.0.0.1"
	}
	if cfg.Key == nil {
		cfg.Key = testKey
	}
	if cfg.Role == "" {
		cfg.Role = RoleServer
	}
	cfg.Logger = testLogger(t)
	p, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Start %s: %v", cfg.Name, err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// waitMember waits until p sees name in state st, for up to d; it
// returns how long that took.
func waitMember(t *testing.T, p *Pool, name string, st State, d time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	ch, cancel := p.Subscribe()
	defer cancel()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		if m, ok := p.Member(name); ok && m.State == st {
			return time.Since(began)
		}
		select {
		case <-ch:
		case <-deadline.C:
			m, ok := p.Member(name)
			t.Fatalf("%s: member %s is not %s after %v (known %v: %+v)", p.Name(), name, st, d, ok, m)
		}
	}
}

func TestKeyFromSecret(t *testing.T) {
	a := KeyFromSecret("the-same-secret-of-at-least-32-characters!")
	b := KeyFromSecret("the-same-secret-of-at-least-32-characters!")
	c := KeyFromSecret("another-secret-of-at-least-32-characters!!")
	if len(a) != KeyLen {
		t.Fatalf("key has %d bytes, want %d", len(a), KeyLen)
	}
	if !bytes.Equal(a, b) {
		t.Error("the same secret gave two keys: servers could not gossip with each other")
	}
	if bytes.Equal(a, c) {
		t.Error("two secrets gave the same key")
	}
}

func TestConfigRefused(t *testing.T) {
	good := Config{Name: "n1", Role: RoleAgent, BindAddr: "127.0.0.1", Key: testKey}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no name", func(c *Config) { c.Name = "" }, "Name is required"},
		{"bad role", func(c *Config) { c.Role = "worker" }, `Role "worker"`},
		{"no key", func(c *Config) { c.Key = nil }, "Key has 0 bytes"},
		{"short key", func(c *Config) { c.Key = testKey[:16] }, "Key has 16 bytes"},
		{"bad port", func(c *Config) { c.BindPort = 70000 }, "BindPort 70000"},
		{"bad bind", func(c *Config) { c.BindAddr = "localhost" }, `BindAddr "localhost"`},
		{"bad advertise", func(c *Config) { c.AdvertiseAddr = "x" }, `AdvertiseAddr "x"`},
		{"bad seed", func(c *Config) { c.Join = []string{"10.0.0.1"} }, `join address "10.0.0.1"`},
		{"bad seed port", func(c *Config) { c.Join = []string{"10.0.0.1:0"} }, "bad port"},
		{"bad timing", func(c *Config) { c.Timing = 7 }, "Timing 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.edit(&cfg)
			p, err := Start(context.Background(), cfg)
			if err == nil {
				_ = p.Close()
				t.Fatal("Start accepted the config")
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrConfig mentioning %q", err, tc.want)
			}
		})
	}
}

// Three members; one stops without leaving. The other two must declare
// it dead within the bound the default timings promise (about 3-4 s,
// asserted with room for -race on a shared machine), with a fail event,
// and its role from the metadata.
func TestSilentMemberDeclaredDead(t *testing.T) {
	s1 := start(t, Config{Name: "s1"})
	s2 := start(t, Config{Name: "s2", Join: []string{s1.LocalAddr()}})
	a1 := start(t, Config{Name: "a1", Role: RoleAgent, Join: []string{s1.LocalAddr()}})
	for _, p := range []*Pool{s1, s2, a1} {
		for _, name := range []string{"s1", "s2", "a1"} {
			waitMember(t, p, name, StateAlive, 10*time.Second)
		}
	}
	if m, _ := s2.Member("a1"); m.Role != RoleAgent || m.Addr != a1.LocalAddr() {
		t.Fatalf("s2 sees a1 as %+v, want role agent at %s", m, a1.LocalAddr())
	}
	events, cancel := s1.Subscribe()
	defer cancel()

	cut := time.Now()
	if err := a1.Close(); err != nil {
		t.Fatal(err)
	}
	const bound = 8 * time.Second
	var wg sync.WaitGroup
	for _, p := range []*Pool{s1, s2} {
		wg.Go(func() {
			waitMember(t, p, "a1", StateDead, bound)
			t.Logf("%s declared a1 dead %v after it went silent (default timings)", p.Name(), time.Since(cut).Round(time.Millisecond))
		})
	}
	wg.Wait()
	var failed bool
	for !failed {
		select {
		case ev := <-events:
			if ev.Member.Name == "a1" {
				if ev.Type != EventFail || ev.Member.State != StateDead {
					t.Fatalf("event for a1 = %+v, want a fail event with state dead", ev)
				}
				failed = true
			}
		case <-time.After(time.Second):
			t.Fatal("s1 recorded a1 dead but sent no fail event")
		}
	}
	if m, _ := s1.Member("a1"); m.Since.Before(cut) {
		t.Errorf("a1's Since %v is before it went silent (%v)", m.Since, cut)
	}
	if got := len(s1.Members()); got != 3 {
		t.Errorf("s1 lists %d members, want 3 (dead ones stay listed)", got)
	}
}

func TestLeaveIsNotFailure(t *testing.T) {
	s1 := start(t, Config{Name: "s1", Timing: TimingFast})
	a1 := start(t, Config{Name: "a1", Role: RoleAgent, Join: []string{s1.LocalAddr()}, Timing: TimingFast})
	waitMember(t, s1, "a1", StateAlive, 10*time.Second)
	// Both ways: a member that knows no one has no one to say goodbye to.
	waitMember(t, a1, "s1", StateAlive, 10*time.Second)
	events, cancel := s1.Subscribe()
	defer cancel()
	if err := a1.Leave(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitMember(t, s1, "a1", StateLeft, 5*time.Second)
	for ev := range events {
		if ev.Member.Name == "a1" && ev.Type != EventUpdate { // the leaving flag comes first
			if ev.Type != EventLeave || ev.Member.State != StateLeft {
				t.Fatalf("event %+v, want leave", ev)
			}
			break
		}
	}
}

// A member with another key cannot join: its attempts fail and the pool
// never lists it.
func TestWrongKeyCannotJoin(t *testing.T) {
	s1 := start(t, Config{Name: "s1", Timing: TimingFast})
	seen, cancel := s1.Subscribe()
	defer cancel()
	other := KeyFromSecret("a-different-cluster-secret-of-32-characters")
	intruder := start(t, Config{Name: "intruder", Role: RoleAgent, Key: other, Timing: TimingFast})
	attempts := make(chan error, 16)
	intruder.mu.Lock()
	intruder.joinHook = func(n int, err error) {
		if n > 0 {
			err = nil
		}
		select {
		case attempts <- err:
		default:
		}
	}
	intruder.mu.Unlock()
	if err := intruder.Join([]string{s1.LocalAddr()}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		select {
		case err := <-attempts:
			if err == nil {
				t.Fatalf("attempt %d with the wrong key joined", i+1)
			}
			t.Logf("attempt %d refused: %v", i+1, err)
		case <-time.After(10 * time.Second):
			t.Fatal("no join attempt finished")
		}
	}
	if _, ok := s1.Member("intruder"); ok {
		t.Fatal("s1 lists a member that holds another key")
	}
	if _, ok := intruder.Member("s1"); ok {
		t.Fatal("the intruder learned of s1")
	}
	select {
	case ev := <-seen:
		t.Fatalf("s1 saw %+v", ev)
	default:
	}
}

// An agent whose seed is not up yet keeps trying and joins once it is.
func TestJoinRetriesUntilSeedStarts(t *testing.T) {
	port := freeUDPTCPPort(t)
	seed := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	a1 := start(t, Config{Name: "a1", Role: RoleAgent, Timing: TimingFast})
	failed := make(chan struct{}, 1)
	a1.mu.Lock()
	a1.joinHook = func(n int, err error) {
		if n == 0 {
			select {
			case failed <- struct{}{}:
			default:
			}
		}
	}
	a1.mu.Unlock()
	if err := a1.Join([]string{seed}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-failed:
	case <-time.After(10 * time.Second):
		t.Fatal("no failed join attempt while the seed is down")
	}
	s1 := start(t, Config{Name: "s1", BindPort: port, Timing: TimingFast})
	waitMember(t, a1, "s1", StateAlive, 10*time.Second)
	waitMember(t, s1, "a1", StateAlive, 10*time.Second)
}

// freeUDPTCPPort finds a loopback port free for both TCP and UDP.
func freeUDPTCPPort(t *testing.T) int {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		l.Close()
		if err == nil {
			u.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

func TestLogWriterLevels(t *testing.T) {
	for _, tc := range []struct {
		line string
		lvl  slog.Level
		msg  string
	}{
		{"[DEBUG] memberlist: Stream connection from=1.2.3.4\n", slog.LevelDebug, "Stream connection from=1.2.3.4"},
		{"[INFO] memberlist: Marking a1 as failed\n", slog.LevelInfo, "Marking a1 as failed"},
		{"[WARN] memberlist: Refuting a dead message\n", slog.LevelWarn, "Refuting a dead message"},
		{"[ERR] memberlist: Failed to decrypt\n", slog.LevelError, "Failed to decrypt"},
		// Issue 15 item 7: the ERROR every shutdown logged.
		{"[ERR] memberlist: Failed to send gossip to 10.213.51.2:6445: write udp [::]:40311->10.213.51.2:6445: use of closed network connection\n", slog.LevelDebug, "Failed to send gossip to 10.213.51.2:6445: write udp [::]:40311->10.213.51.2:6445: use of closed network connection"},
		{"no prefix at all\n", slog.LevelInfo, "no prefix at all"},
	} {
		var buf bytes.Buffer
		w := logWriter{slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
		if n, err := w.Write([]byte(tc.line)); err != nil || n != len(tc.line) {
			t.Fatalf("Write = %d, %v", n, err)
		}
		out := buf.String()
		if !strings.Contains(out, `"level":"`+tc.lvl.String()+`"`) || !strings.Contains(out, `"msg":"`+tc.msg+`"`) {
			t.Errorf("%q logged as %s, want level %s and msg %q", tc.line, out, tc.lvl, tc.msg)
		}
	}
}

// A server's API URL travels in its metadata: agents learn from the pool
// every server they may fail over to (issue 9 item 7).
func TestServerAPIURLInMetadata(t *testing.T) {
	s1 := start(t, Config{Name: "server:s1", API: "https://10.0.0.1:6443", Timing: TimingFast})
	a1 := start(t, Config{Name: "a1", Role: RoleAgent, Join: []string{s1.LocalAddr()}, Timing: TimingFast})
	waitMember(t, a1, "server:s1", StateAlive, 10*time.Second)
	if m, _ := a1.Member("server:s1"); m.API != "https://10.0.0.1:6443" || m.Role != RoleServer {
		t.Fatalf("the agent sees the server as %+v, want API https://10.0.0.1:6443", m)
	}
	waitMember(t, s1, "a1", StateAlive, 10*time.Second)
	if m, _ := s1.Member("a1"); m.API != "" {
		t.Fatalf("an agent member carries API %q", m.API)
	}
}
