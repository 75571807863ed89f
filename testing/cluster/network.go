package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Network is the links between the servers of a cluster. Every connection
// a server opens to another goes through Dial, so a test can cut a server
// off: its dials fail and its open connections are closed, in both
// directions, while clients can still reach its API (as when a site's
// uplink to the other servers drops).
type Network struct {
	mu       sync.Mutex
	owner    map[string]string // address -> server ID listening on it
	isolated map[string]bool
	holed    map[string]bool
	conns    map[string]map[net.Conn]string // server ID -> open conns -> peer ID
}

// NewNetwork makes a network where every server reaches every other.
func NewNetwork() *Network {
	return &Network{owner: map[string]string{}, isolated: map[string]bool{}, holed: map[string]bool{}, conns: map[string]map[net.Conn]string{}}
}

// Register says that server id listens on addr.
func (n *Network) Register(id, addr string) {
	n.mu.Lock()
	n.owner[addr] = id
	n.mu.Unlock()
}

// Dialer returns the dial function for server id.
func (n *Network) Dialer(id string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.mu.Lock()
		peer, known := n.owner[addr]
		cut := known && (n.isolated[id] || n.isolated[peer])
		holed := known && (n.holed[id] || n.holed[peer])
		n.mu.Unlock()
		if holed {
			// A dial into a black hole gets no answer: it ends with the
			// caller's patience, or a SYN timeout (short here, so that a
			// server shutting down is not held by its dials).
			t := time.NewTimer(2 * time.Second)
			defer t.Stop()
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("no answer from %s: its link is dead", peer)}
		}
		if cut {
			return nil, &net.OpError{Op: "dial", Net: network, Addr: nil, Err: fmt.Errorf("partitioned: %s cannot reach %s", id, peer)}
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil || !known {
			return c, err
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.isolated[id] || n.isolated[peer] {
			_ = c.Close()
			return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("partitioned: %s cannot reach %s", id, peer)}
		}
		tc := &trackedConn{Conn: c, n: n, id: id, closed: make(chan struct{})}
		if n.conns[id] == nil {
			n.conns[id] = map[net.Conn]string{}
		}
		n.conns[id][tc] = peer
		return tc, nil
	}
}

// Isolate cuts server id off from every other server.
func (n *Network) Isolate(id string) {
	n.mu.Lock()
	n.isolated[id] = true
	var victims []net.Conn
	for src, cs := range n.conns {
		for c, dst := range cs {
			if src == id || dst == id {
				victims = append(victims, c)
			}
		}
	}
	n.mu.Unlock()
	for _, c := range victims {
		_ = c.Close()
	}
}

// Blackhole cuts server id off as a dead link does: nothing it or the
// others send on their connections arrives, nothing is closed or
// refused, and new dials get no answer. Peers notice only by their
// timeouts. Heal does not undo it.
func (n *Network) Blackhole(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.holed[id] = true
	for src, cs := range n.conns {
		for c, dst := range cs {
			if src == id || dst == id {
				c.(*trackedConn).holed.Store(true)
			}
		}
	}
}

// Heal restores every link.
func (n *Network) Heal() {
	n.mu.Lock()
	clear(n.isolated)
	n.mu.Unlock()
}

type trackedConn struct {
	net.Conn
	n  *Network
	id string
	// holed: a black hole swallows what is written, and a read waits
	// for Close.
	holed        atomic.Bool
	readDeadline atomic.Value // time.Time
	closed       chan struct{}
	closeOnce    sync.Once
}

func (c *trackedConn) Write(b []byte) (int, error) {
	if c.holed.Load() {
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func (c *trackedConn) Read(b []byte) (int, error) {
	if c.holed.Load() {
		// Nothing arrives: wait for Close or the read deadline (looked
		// at now and then, as it may move).
		for {
			dl, _ := c.readDeadline.Load().(time.Time)
			if !dl.IsZero() && !time.Now().Before(dl) {
				return 0, os.ErrDeadlineExceeded
			}
			select {
			case <-c.closed:
				return 0, net.ErrClosed
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return c.Conn.Read(b)
}

func (c *trackedConn) SetDeadline(t time.Time) error {
	c.readDeadline.Store(t)
	return c.Conn.SetDeadline(t)
}

func (c *trackedConn) SetReadDeadline(t time.Time) error {
	c.readDeadline.Store(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *trackedConn) Close() error {
	c.n.mu.Lock()
	delete(c.n.conns[c.id], c)
	c.n.mu.Unlock()
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}
