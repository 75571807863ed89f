package auth

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/pki"
)

// fakeTokens is a TokenLookup over a map, counting lookups.
type fakeTokens struct {
	mu      sync.Mutex
	tokens  map[string]*api.Token
	rv      int
	lookups atomic.Int64
	err     error
}

func (f *fakeTokens) GetToken(id string) (*api.Token, error) {
	f.lookups.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return f.tokens[id], nil
}

// put stores a token with a fresh resourceVersion and returns the bearer
// header for it.
func (f *fakeTokens) put(id, secret string, spec api.TokenSpec) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tokens == nil {
		f.tokens = make(map[string]*api.Token)
	}
	f.rv++
	spec.SecretHash = HashSecret(secret)
	f.tokens[id] = &api.Token{
		ObjectMeta: api.ObjectMeta{Name: id, ResourceVersion: strconv.Itoa(f.rv)},
		Spec:       spec,
	}
	return "Bearer " + id + "." + secret
}

func (f *fakeTokens) remove(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.tokens, id)
}

// fakeClock is a settable clock.
type fakeClock struct{ ns atomic.Int64 }

func newClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

const (
	devSecret  = "devsecret0123456"
	nodeSecret = "nodesecret012345"
)

func TestAuthenticate(t *testing.T) {
	clock := newClock()
	tokens := &fakeTokens{}
	dev := tokens.put("dev001", devSecret, api.TokenSpec{Role: api.RoleDeveloper, Namespaces: []string{"team-a"}})
	node := tokens.put("node01", nodeSecret, api.TokenSpec{Role: api.RoleNode, NodeName: "edge-1"})
	join := tokens.put("join01", "joinsecret012345", api.TokenSpec{Role: api.RoleNode})
	past := api.NewTime(clock.Now().Add(-time.Minute))
	expired := tokens.put("old001", "oldsecret0123456", api.TokenSpec{Role: api.RoleClusterAdmin, Expires: past})
	future := api.NewTime(clock.Now().Add(time.Hour))
	later := tokens.put("new001", "newsecret0123456", api.TokenSpec{Role: api.RoleClusterAdmin, Expires: future})
	tokens.mu.Lock()
	tokens.tokens["bad001"] = &api.Token{ObjectMeta: api.ObjectMeta{Name: "bad001"}, Spec: api.TokenSpec{Role: api.RoleClusterAdmin, SecretHash: "zz"}}
	tokens.tokens["mis001"] = &api.Token{ObjectMeta: api.ObjectMeta{Name: "other1"}, Spec: api.TokenSpec{Role: api.RoleClusterAdmin, SecretHash: HashSecret(devSecret)}}
	tokens.mu.Unlock()
	a := NewAuthenticator(tokens, clock.Now)

	for _, tc := range []struct {
		name    string
		header  string
		want    *Identity
		wantErr error
	}{
		{"developer", dev, &Identity{Name: "token:dev001", Role: api.RoleDeveloper, Namespaces: []string{"team-a"}, TokenID: "dev001"}, nil},
		{"node", node, &Identity{Name: "system:node:edge-1", Role: api.RoleNode, NodeName: "edge-1", TokenID: "node01"}, nil},
		{"join", join, &Identity{Name: "token:join01", Role: api.RoleNode, TokenID: "join01"}, nil},
		{"lower-case scheme", "bearer dev001." + devSecret, &Identity{Name: "token:dev001", Role: api.RoleDeveloper, Namespaces: []string{"team-a"}, TokenID: "dev001"}, nil},
		{"not yet expired", later, &Identity{Name: "token:new001", Role: api.RoleClusterAdmin, TokenID: "new001"}, nil},
		{"empty", "", nil, ErrNoCredentials},
		{"bearer without token", "Bearer ", nil, ErrNoCredentials},
		{"basic", "Basic dXNlcjpwYXNz", nil, ErrInvalidToken},
		{"malformed", "Bearer nonsense", nil, ErrInvalidToken},
		{"unknown id", "Bearer zzz999." + devSecret, nil, ErrInvalidToken},
		{"wrong secret", "Bearer dev001.wrongsecret01234", nil, ErrInvalidToken},
		{"other token's secret", "Bearer node01." + devSecret, nil, ErrInvalidToken},
		{"expired", expired, nil, ErrExpired},
		{"malformed stored hash", "Bearer bad001." + devSecret, nil, ErrInvalidToken},
		{"stored name differs from id", "Bearer mis001." + devSecret, nil, ErrInvalidToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := a.Authenticate(tc.header)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || got != nil {
					t.Fatalf("got %+v, %v; want error %v", got, err, tc.wantErr)
				}
				_, secret, _ := strings.Cut(tc.header, ".")
				if secret != "" && strings.Contains(err.Error(), secret) {
					t.Fatalf("error %q echoes the secret", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(*got) != fmt.Sprint(*tc.want) {
				t.Fatalf("identity %+v, want %+v", *got, *tc.want)
			}
		})
	}

	t.Run("lookup error refuses", func(t *testing.T) {
		broken := &fakeTokens{err: errors.New("store closed")}
		_, err := NewAuthenticator(broken, clock.Now).Authenticate(dev)
		if !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("err = %v, want ErrInvalidToken", err)
		}
	})
}

func TestAuthenticateCache(t *testing.T) {
	clock := newClock()
	tokens := &fakeTokens{}
	header := tokens.put("dev001", devSecret, api.TokenSpec{Role: api.RoleDeveloper})
	a := NewAuthenticator(tokens, clock.Now)

	first, err := a.Authenticate(header)
	if err != nil {
		t.Fatal(err)
	}
	n := tokens.lookups.Load()
	for range 100 {
		got, err := a.Authenticate(header)
		if err != nil || got != first {
			t.Fatalf("cached authenticate: %v, %v", got, err)
		}
	}
	if d := tokens.lookups.Load() - n; d != 0 {
		t.Fatalf("cached path made %d store lookups, want 0", d)
	}

	// After the revalidation interval an unchanged token is looked up once
	// and keeps its identity.
	clock.Advance(RevalidateAfter)
	if got, err := a.Authenticate(header); err != nil || got != first {
		t.Fatalf("revalidated: %v, %v", got, err)
	}
	if d := tokens.lookups.Load() - n; d != 1 {
		t.Fatalf("revalidation made %d lookups, want 1", d)
	}

	// A deleted token keeps working for less than RevalidateAfter, then
	// stops.
	tokens.remove("dev001")
	clock.Advance(RevalidateAfter - time.Millisecond)
	if _, err := a.Authenticate(header); err != nil {
		t.Fatalf("within the interval: %v", err)
	}
	clock.Advance(time.Millisecond)
	if _, err := a.Authenticate(header); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("deleted token after %s: err = %v, want ErrInvalidToken", RevalidateAfter, err)
	}

	// A token re-created with the same id and another secret: the old
	// secret stops working, the new one works with the new role.
	tokens.put("dev001", devSecret, api.TokenSpec{Role: api.RoleDeveloper})
	if _, err := a.Authenticate(header); err != nil {
		t.Fatal(err)
	}
	newHeader := tokens.put("dev001", "anothersecret012", api.TokenSpec{Role: api.RoleClusterAdmin})
	clock.Advance(RevalidateAfter)
	if _, err := a.Authenticate(header); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("old secret after rotation: err = %v", err)
	}
	if got, err := a.Authenticate(newHeader); err != nil || got.Role != api.RoleClusterAdmin {
		t.Fatalf("new secret: %+v, %v", got, err)
	}

	// Expiry is enforced on the cached path, without a lookup.
	exp := api.NewTime(clock.Now().Add(10 * time.Second))
	expHeader := tokens.put("exp001", "expsecret0123456", api.TokenSpec{Role: api.RoleClusterAdmin, Expires: exp})
	if _, err := a.Authenticate(expHeader); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	n = tokens.lookups.Load()
	if _, err := a.Authenticate(expHeader); !errors.Is(err, ErrExpired) {
		t.Fatalf("expired cached token: err = %v, want ErrExpired", err)
	}
	if tokens.lookups.Load() != n {
		t.Fatal("expiry check needed a lookup")
	}
}

func TestAuthenticateStatic(t *testing.T) {
	clock := newClock()
	tokens := &fakeTokens{}
	id, secret := AdminToken("0123456789abcdefghijklmnopqrstuvwxyz-secret")
	// A stored token with the same id but another secret must not win.
	tokens.put(id, "storedsecret0123", api.TokenSpec{Role: api.RoleDeveloper})
	a := NewAuthenticator(tokens, clock.Now)
	if err := a.AddStatic(id+"."+secret, Identity{Name: "admin", Role: api.RoleClusterAdmin}); err != nil {
		t.Fatal(err)
	}
	if err := a.AddStatic("bad", Identity{}); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("AddStatic(bad) err = %v", err)
	}
	got, err := a.Authenticate("Bearer " + id + "." + secret)
	if err != nil || got.Role != api.RoleClusterAdmin || got.TokenID != id {
		t.Fatalf("static token: %+v, %v", got, err)
	}
	if _, err := a.Authenticate("Bearer " + id + ".storedsecret0123"); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("stored secret for a static id: err = %v", err)
	}
	n := tokens.lookups.Load()
	clock.Advance(time.Hour)
	if _, err := a.Authenticate("Bearer " + id + "." + secret); err != nil {
		t.Fatal(err)
	}
	if tokens.lookups.Load() != n {
		t.Fatal("static token looked up in the store")
	}
	// A rotation adds the next generation under the same id: the old
	// secret, cached a moment ago, stops working at once.
	_, next := AdminTokenGeneration("0123456789abcdefghijklmnopqrstuvwxyz-secret", 1)
	if err := a.AddStatic(id+"."+next, Identity{Name: "admin", Role: api.RoleClusterAdmin}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate("Bearer " + id + "." + secret); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("the rotated-out secret: err = %v", err)
	}
	if got, err := a.Authenticate("Bearer " + id + "." + next); err != nil || got.Role != api.RoleClusterAdmin {
		t.Fatalf("the next generation: %+v, %v", got, err)
	}
}

// TestAuthenticateConcurrent runs authentications while tokens change; run
// with -race.
func TestAuthenticateConcurrent(t *testing.T) {
	clock := newClock()
	tokens := &fakeTokens{}
	header := tokens.put("dev001", devSecret, api.TokenSpec{Role: api.RoleDeveloper})
	a := NewAuthenticator(tokens, clock.Now)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				if g == 0 && i%10 == 0 {
					tokens.put("dev001", devSecret, api.TokenSpec{Role: api.RoleDeveloper})
					clock.Advance(RevalidateAfter)
				}
				if _, err := a.Authenticate(header); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestIdentityFromCert(t *testing.T) {
	cert := func(cn string, ou ...string) *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: cn, OrganizationalUnit: ou}}
	}
	for _, tc := range []struct {
		name string
		cert *x509.Certificate
		want *Identity
	}{
		{"server", cert("s1", pki.ServerOU), &Identity{Name: "system:server:s1", Role: api.RoleServer}},
		{"node", cert("system:node:edge-1", pki.NodeOU), &Identity{Name: "system:node:edge-1", Role: api.RoleNode, NodeName: "edge-1"}},
		{"node without name", cert("system:node:", pki.NodeOU), nil},
		{"node cn without prefix", cert("edge-1", pki.NodeOU), nil},
		{"no ou", cert("s1"), nil},
		{"nil", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := IdentityFromCert(tc.cert)
			if tc.want == nil {
				if !errors.Is(err, ErrInvalidCertificate) {
					t.Fatalf("got %+v, %v; want ErrInvalidCertificate", got, err)
				}
				return
			}
			if err != nil || fmt.Sprint(*got) != fmt.Sprint(*tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func BenchmarkAuthenticateCached(b *testing.B) {
	tokens := &fakeTokens{}
	header := tokens.put("dev001", devSecret, api.TokenSpec{Role: api.RoleDeveloper})
	a := NewAuthenticator(tokens, nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := a.Authenticate(header); err != nil {
				b.Fatal(err)
			}
		}
	})
}
