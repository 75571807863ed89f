package cluster

import (
	"context"
	"fmt"
	"net"
	"sync"
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
	conns    map[string]map[net.Conn]string // server ID -> open conns -> peer ID
}

// NewNetwork makes a network where every server reaches every other.
func NewNetwork() *Network {
	return &Network{owner: map[string]string{}, isolated: map[string]bool{}, conns: map[string]map[net.Conn]string{}}
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
		n.mu.Unlock()
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
		tc := &trackedConn{Conn: c, n: n, id: id}
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
}

func (c *trackedConn) Close() error {
	c.n.mu.Lock()
	delete(c.n.conns[c.id], c)
	c.n.mu.Unlock()
	return c.Conn.Close()
}
