package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/core"
)

// Headers between servers. A follower marks what it forwards with
// hopHeader, and a server that is not the leader either refuses such a
// request instead of forwarding it again, so leadership changes cannot
// make a request loop. Callers that authenticated with a client
// certificate cannot pass it through the proxy, so the follower states
// their identity in the identity headers; the leader believes those only
// from a peer that itself presented a server certificate.
const (
	hopHeader          = "X-Outpost-Forwarded-By"
	identityNameHeader = "X-Outpost-Identity-Name"
	identityRoleHeader = "X-Outpost-Identity-Role"
	identityNodeHeader = "X-Outpost-Identity-Node"
)

// forwardTarget travels in the request context from forward to the
// proxy's Rewrite.
type forwardTarget struct {
	url *url.URL
	// certIdentity is the caller when it authenticated with a client
	// certificate rather than a token.
	certIdentity *auth.Identity
}

type forwardKey struct{}

// leaderWaitTimeout is how long a follower waits to learn the leader before
// it answers a write with 503.
const leaderWaitTimeout = 2 * time.Second

// newProxy builds the reverse proxy that hands writes to the leader.
// Between servers it presents this server's certificate and verifies the
// leader's against the cluster CA.
func (s *Server) newProxy(clientTLS *tls.Config) (*httputil.ReverseProxy, *http.Transport) {
	dial := s.cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	tr := &http.Transport{
		DialContext:           dial,
		TLSClientConfig:       clientTLS,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   128,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: core.ApplyTimeout + 10*time.Second,
	}
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			ft, _ := pr.In.Context().Value(forwardKey{}).(*forwardTarget)
			if ft == nil {
				return
			}
			pr.SetURL(ft.url)
			pr.SetXForwarded()
			h := pr.Out.Header
			h.Set(hopHeader, s.cfg.ID)
			// Whatever the client sent in these is not to be believed.
			h.Del(identityNameHeader)
			h.Del(identityRoleHeader)
			h.Del(identityNodeHeader)
			if id := ft.certIdentity; id != nil {
				h.Set(identityNameHeader, id.Name)
				h.Set(identityRoleHeader, id.Role)
				h.Set(identityNodeHeader, id.NodeName)
			}
		},
		Transport: tr,
		ErrorLog:  slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if cause := context.Cause(r.Context()); errors.Is(cause, errLeaderMoved) {
				writeError(w, api.NewTimeout("the leader the write was forwarded to lost the leadership before it answered ("+cause.Error()+
					"): it may or may not have been applied; read the object to find out"))
				return
			}
			if r.Context().Err() != nil {
				return // the client went away
			}
			s.log.Warn("forwarding to the leader failed", "method", r.Method, "path", r.URL.Path, "err", err)
			if isDialError(err) {
				writeError(w, unavailable("cannot reach the raft leader to forward the write: "+err.Error()+"; retry shortly", 1))
				return
			}
			writeError(w, api.NewTimeout("the leader did not answer the forwarded write: it may or may not have been applied; read the object to find out ("+err.Error()+")"))
		},
	}
	return p, tr
}

// isDialError reports whether err happened before the request left, so
// that retrying cannot apply a write twice.
func isDialError(err error) bool {
	if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Op == "dial" {
		return true
	}
	return false
}

// forwardIfFollower hands a write to the leader when this server is not
// it, and reports whether it did.
func (s *Server) forwardIfFollower(w *recorder, r *http.Request) bool {
	if s.node.IsLeader() {
		return false
	}
	s.forward(w, r, nil)
	return true
}

// forward proxies r to the leader. body replaces r's body when the
// handler has read it already.
func (s *Server) forward(w *recorder, r *http.Request, body []byte) {
	if r.Header.Get(hopHeader) != "" {
		writeError(w, unavailable("leadership moved while the write was forwarded; retry", 1))
		return
	}
	ld := s.node.Leader()
	if ld.ID == "" || ld.APIAddr == "" {
		// Just after an election the leader, or its API address, may not
		// be known yet; waiting a moment beats failing the write.
		ctx, cancel := context.WithTimeout(r.Context(), leaderWaitTimeout)
		ld, _ = s.node.WaitForLeader(ctx)
		cancel()
	}
	if ld.ID == "" || ld.APIAddr == "" || ld.ID == s.cfg.ID {
		if s.node.Removed(r.Context()) {
			writeError(w, unavailable(s.noLeader(r.Context()), 30))
			return
		}
		writeError(w, unavailable("the cluster has no raft leader right now; retry shortly", 1))
		return
	}
	target, err := leaderURL(ld.APIAddr, s.cfg.Insecure)
	if err != nil {
		writeError(w, unavailable("the leader "+ld.ID+" announced an unusable API address: "+err.Error(), 1))
		return
	}
	if body != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	ft := &forwardTarget{url: target}
	if r.Header.Get("Authorization") == "" {
		ft.certIdentity, _ = s.certIdentity(r)
	}
	ctx, cancel := context.WithCancelCause(context.WithValue(r.Context(), forwardKey{}, ft))
	defer cancel(nil)
	stop := s.cancelOnLeaderChange(ctx, ld.ID, cancel)
	defer stop()
	s.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// errLeaderMoved ends a forwarded request whose leader was replaced.
var errLeaderMoved = errors.New("another server leads now")

// cancelOnLeaderChange cancels a request forwarded to leader with
// errLeaderMoved once this server knows another leader: a leader that
// died with its link cut (no reset) would otherwise hold every forwarded
// write until the client's own timeout, long after a new leader was
// elected. The outcome stays unknown (504), as for any forwarded write
// without an answer. stop ends the watch.
func (s *Server) cancelOnLeaderChange(ctx context.Context, leader string, cancel context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	go func() {
		// Leader news can be missed between looks; look again now and
		// then regardless.
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			wake := s.node.LeaderChanged()
			if cur := s.node.Leader(); cur.ID != "" && cur.ID != leader {
				cancel(fmt.Errorf("%w: %s", errLeaderMoved, cur.ID))
				return
			}
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-wake:
			case <-t.C:
			}
		}
	}()
	return func() { close(done) }
}

// leaderURL parses the leader's API address, which raftstore passes on as
// the URL the leader advertised.
func leaderURL(addr string, insecure bool) (*url.URL, error) {
	if !strings.Contains(addr, "://") {
		scheme := "https://"
		if insecure {
			scheme = "http://"
		}
		addr = scheme + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return nil, err
	}
	if u.Host == "" {
		return nil, errors.New("no host in " + addr)
	}
	u.Path, u.RawPath, u.RawQuery = "", "", ""
	return u, nil
}

// certIdentity is the identity of a caller that presented a verified
// client certificate of the cluster CA and no token. A server forwarding
// for such a caller names it in the identity headers.
func (s *Server) certIdentity(r *http.Request) (*auth.Identity, error) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return nil, auth.ErrNoCredentials
	}
	id, err := auth.IdentityFromCert(r.TLS.VerifiedChains[0][0])
	if err != nil {
		return nil, err
	}
	if id.Role == api.RoleServer && r.Header.Get(hopHeader) != "" && r.Header.Get(identityRoleHeader) != "" {
		return &auth.Identity{
			Name:     r.Header.Get(identityNameHeader),
			Role:     r.Header.Get(identityRoleHeader),
			NodeName: r.Header.Get(identityNodeHeader),
		}, nil
	}
	return id, nil
}
