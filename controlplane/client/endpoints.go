package client

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Back-off of a server that failed: a server that does not answer is
// passed over for a while, doubling per failure in a row, so that a
// client with several servers does not spend every request on a dead
// one; one that answers again is used again at once.
const (
	serverBackoffBase = time.Second
	serverBackoffMax  = 30 * time.Second
)

// endpoints is the servers a client may talk to, the one it talks to now
// first. Copies of a client (WithToken) share one set, so what one
// learns of a dead server the others use.
type endpoints struct {
	mu   sync.Mutex
	list []*endpoint
	// cur is the index of the server requests go to.
	cur int
	now func() time.Time
}

type endpoint struct {
	base *url.URL
	// fails counts failures in a row; until is when the server may be
	// tried again first.
	fails int
	until time.Time
}

// parseServer checks one server URL ("host:port" means https).
// CheckServer is nil when server is an API URL New takes (https, or
// host:port as kubectl takes it), else why not.
func CheckServer(server string) error {
	_, err := parseServer(server, false)
	return err
}

func parseServer(server string, insecure bool) (*url.URL, error) {
	s := server
	if !strings.Contains(s, "://") {
		// "host:port", as users type it and as kubectl takes it.
		s = "https://" + s
	}
	u, err := url.Parse(strings.TrimRight(s, "/"))
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrBadServer, server, err)
	}
	if u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w %q: want https://host:port", ErrBadServer, server)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !insecure {
			return nil, fmt.Errorf("%w (server %s)", ErrPlainHTTP, server)
		}
	default:
		return nil, fmt.Errorf("%w %q: scheme must be https or http", ErrBadServer, server)
	}
	return u, nil
}

// pick returns the server to try next, skipping tried ones: the current
// one unless it is backing off, else the next that is not, else the one
// whose back-off ends first. nil when every server was tried.
func (e *endpoints) pick(tried []*endpoint) *endpoint {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	var soonest *endpoint
	for i := range e.list {
		ep := e.list[(e.cur+i)%len(e.list)]
		if slices.Contains(tried, ep) {
			continue
		}
		if !now.Before(ep.until) {
			return ep
		}
		if soonest == nil || ep.until.Before(soonest.until) {
			soonest = ep
		}
	}
	return soonest
}

// failed records that ep did not answer and moves on from it.
func (e *endpoints) failed(ep *endpoint) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ep.fails++
	wait := serverBackoffBase << min(ep.fails-1, 5)
	ep.until = e.now().Add(min(wait, serverBackoffMax))
	if i := slices.Index(e.list, ep); i == e.cur && len(e.list) > 1 {
		e.cur = (i + 1) % len(e.list)
	}
}

// answered records that ep answered: it becomes the current server.
func (e *endpoints) answered(ep *endpoint) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ep.fails, ep.until = 0, time.Time{}
	if i := slices.Index(e.list, ep); i >= 0 {
		e.cur = i
	}
}

func (e *endpoints) current() *url.URL {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.list[e.cur].base
}

func (e *endpoints) size() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.list)
}

// urls lists the servers, the current one first.
func (e *endpoints) urls() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]string, 0, len(e.list))
	for i := range e.list {
		out = append(out, e.list[(e.cur+i)%len(e.list)].base.String())
	}
	return out
}

// set replaces the servers with servers, keeping what is known of the
// ones that stay (and the current one current, if it stays).
func (e *endpoints) set(servers []*url.URL) {
	e.mu.Lock()
	defer e.mu.Unlock()
	cur := e.list[e.cur].base.String()
	old := map[string]*endpoint{}
	for _, ep := range e.list {
		old[ep.base.String()] = ep
	}
	list := make([]*endpoint, 0, len(servers))
	seen := map[string]bool{}
	e.cur = 0
	for _, u := range servers {
		k := u.String()
		if seen[k] {
			continue
		}
		seen[k] = true
		ep := old[k]
		if ep == nil {
			ep = &endpoint{base: u}
		}
		if k == cur {
			e.cur = len(list)
		}
		list = append(list, ep)
	}
	e.list = list
}

// SetServers replaces the servers the client may fail over between
// (agents learn them from the API and from gossip). An empty list or a
// bad URL changes nothing and is an error.
func (c *Client) SetServers(servers []string) error {
	if len(servers) == 0 {
		return ErrNoServer
	}
	urls := make([]*url.URL, 0, len(servers))
	var errs []error
	for _, s := range servers {
		u, err := parseServer(s, c.insecure)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if (u.Scheme == "https") != (c.eps.current().Scheme == "https") {
			errs = append(errs, fmt.Errorf("%w %q: every server must use the same scheme", ErrBadServer, s))
			continue
		}
		urls = append(urls, u)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	c.eps.set(urls)
	return nil
}

// Servers lists the servers the client may talk to, the current one first.
func (c *Client) Servers() []string { return c.eps.urls() }

// retryable reports whether a request that failed with err (no reply) or
// with code may be sent to another server: a 503 was refused before it
// reached the raft log, and a request whose connection was never made
// was never seen; any other failure of a read is safe to repeat.
func retryable(method string, err error, code int) bool {
	if err == nil {
		return code == http.StatusServiceUnavailable
	}
	if method == http.MethodGet || method == http.MethodHead {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
