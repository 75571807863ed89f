package raftstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// The first byte a dialer writes on every connection says what follows.
const (
	connRaft byte = 'R' // hashicorp/raft's msgpack RPCs
	connRPC  byte = 'O' // outpost RPCs (rpc.go)
)

const (
	// headerTimeout bounds the TLS handshake plus the header byte, so that
	// a silent client cannot hold a goroutine.
	headerTimeout = 10 * time.Second
	// acceptBacklog is how many accepted raft connections may wait for the
	// raft transport to pick them up.
	acceptBacklog = 16
)

// mux owns the one listener of a node and hands each connection to raft or
// to the outpost RPC server by its header byte.
type mux struct {
	ln        net.Listener
	advertise net.Addr
	serverTLS *tls.Config
	clientTLS *tls.Config
	log       *slog.Logger

	raftConns chan net.Conn
	handleRPC func(net.Conn)
	dialFn    func(ctx context.Context, network, addr string) (net.Conn, error)

	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup

	connMu sync.Mutex
	conns  map[net.Conn]struct{} // accepted connections, closed on Close
}

// trackedConn is an accepted raft connection: raft closes it when done,
// and Close closes whatever raft still holds.
type trackedConn struct {
	net.Conn
	m *mux
}

func (c *trackedConn) Close() error {
	c.m.connMu.Lock()
	delete(c.m.conns, c.Conn)
	c.m.connMu.Unlock()
	return c.Conn.Close()
}

// tcpAddr is a net.Addr for an advertised host:port that need not be an IP
// (raft only ever calls String on it).
type tcpAddr string

func (a tcpAddr) Network() string { return "tcp" }
func (a tcpAddr) String() string  { return string(a) }

func newMux(cfg Config, log *slog.Logger) (*mux, error) {
	ln, err := net.Listen("tcp", cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.BindAddr, err)
	}
	adv := cfg.AdvertiseAddr
	if adv == "" {
		ta := ln.Addr().(*net.TCPAddr)
		if ta.IP.IsUnspecified() {
			_ = ln.Close()
			return nil, fmt.Errorf("%w: AdvertiseAddr: required when BindAddr %q has no specific host", ErrInvalidConfig, cfg.BindAddr)
		}
		adv = ta.String()
	}
	m := &mux{
		ln:        ln,
		advertise: tcpAddr(adv),
		log:       log,
		raftConns: make(chan net.Conn, acceptBacklog),
		dialFn:    cfg.Dial,
		done:      make(chan struct{}),
		conns:     make(map[net.Conn]struct{}),
	}
	if cfg.ServerTLS != nil {
		m.serverTLS = cfg.ServerTLS.Clone()
		m.serverTLS.ClientAuth = tls.RequireAndVerifyClientCert
		if m.serverTLS.MinVersion < tls.VersionTLS13 {
			m.serverTLS.MinVersion = tls.VersionTLS13
		}
		m.clientTLS = cfg.ClientTLS.Clone()
		if m.clientTLS.MinVersion < tls.VersionTLS13 {
			m.clientTLS.MinVersion = tls.VersionTLS13
		}
	}
	return m, nil
}

// serve accepts connections until Close; handleRPC must be set.
func (m *mux) serve() {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		backoff := 5 * time.Millisecond
		for {
			c, err := m.ln.Accept()
			if err != nil {
				select {
				case <-m.done:
					return
				default:
				}
				m.log.Warn("raft listener accept failed", "error", err)
				t := time.NewTimer(backoff)
				select {
				case <-m.done:
					t.Stop()
					return
				case <-t.C:
				}
				backoff = min(2*backoff, time.Second)
				continue
			}
			backoff = 5 * time.Millisecond
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				m.route(c)
			}()
		}
	}()
}

func (m *mux) route(c net.Conn) {
	if m.serverTLS != nil {
		c = tls.Server(c, m.serverTLS)
	}
	_ = c.SetDeadline(time.Now().Add(headerTimeout))
	var hdr [1]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
			m.log.Warn("raft port: a connection without TLS was refused; a server running with --insecure tried to reach this one, "+
				"and every server of a cluster must agree on --insecure", "remote", c.RemoteAddr().String())
			_ = c.Close()
			return
		}
		m.log.Debug("raft port: connection dropped before its header", "remote", c.RemoteAddr().String(), "error", err)
		_ = c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	switch hdr[0] {
	case connRaft:
		if !m.track(c) {
			_ = c.Close()
			return
		}
		select {
		case m.raftConns <- &trackedConn{Conn: c, m: m}:
		case <-m.done:
			m.untrack(c)
		}
	case connRPC:
		if !m.track(c) {
			_ = c.Close()
			return
		}
		defer m.untrack(c)
		m.handleRPC(c)
	case tlsHandshakeRecord:
		m.log.Warn("raft port: a TLS connection was refused; this server runs with --insecure, the one that tried to reach it does not, "+
			"and every server of a cluster must agree on --insecure", "remote", c.RemoteAddr().String())
		_ = c.Close()
	default:
		m.log.Warn("raft port: unknown connection header", "remote", c.RemoteAddr().String(), "header", hdr[0])
		_ = c.Close()
	}
}

func (m *mux) track(c net.Conn) bool {
	m.connMu.Lock()
	defer m.connMu.Unlock()
	select {
	case <-m.done:
		return false
	default:
	}
	m.conns[c] = struct{}{}
	return true
}

func (m *mux) untrack(c net.Conn) {
	m.connMu.Lock()
	delete(m.conns, c)
	m.connMu.Unlock()
	_ = c.Close()
}

// dial opens a connection to addr and writes the header byte.
func (m *mux) dial(addr string, header byte, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	dial := m.dialFn
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	c, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if m.clientTLS != nil {
		cfg := m.clientTLS
		if cfg.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				_ = c.Close()
				return nil, err
			}
			cfg = cfg.Clone()
			cfg.ServerName = host
		}
		tc := tls.Client(c, cfg)
		_ = tc.SetDeadline(time.Now().Add(timeout))
		if err := tc.Handshake(); err != nil {
			_ = c.Close()
			if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
				return nil, &foreignCAError{addr: addr, err: err}
			}
			_, plain := errors.AsType[tls.RecordHeaderError](err)
			if plain || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
				// A plain-text server answers a TLS hello with garbage
				// or hangs up on it.
				return nil, fmt.Errorf("tls handshake with %s: %w: the server there does not speak TLS; "+
					"is it running with --insecure? Every server of a cluster must agree on --insecure", addr, err)
			}
			return nil, fmt.Errorf("tls handshake with %s: %w", addr, err)
		}
		_ = tc.SetDeadline(time.Time{})
		c = tc
	}
	if _, err := c.Write([]byte{header}); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// Close stops accepting, closes RPC connections and waits for handlers.
func (m *mux) Close() error {
	var err error
	m.closeOnce.Do(func() {
		close(m.done)
		err = m.ln.Close()
		m.connMu.Lock()
		for c := range m.conns {
			_ = c.Close()
		}
		m.connMu.Unlock()
		m.wg.Wait()
		// Raft connections accepted but never picked up.
		for {
			select {
			case c := <-m.raftConns:
				_ = c.Close()
			default:
				return
			}
		}
	})
	return err
}

// raftLayer is the raft.StreamLayer view of the mux.
type raftLayer struct {
	m         *mux
	closed    chan struct{}
	closeOnce sync.Once
}

var _ raft.StreamLayer = (*raftLayer)(nil)

func (l *raftLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.m.raftConns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-l.m.done:
		return nil, net.ErrClosed
	}
}

func (l *raftLayer) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

// Addr is the advertised address: raft puts it in its RPC headers.
func (l *raftLayer) Addr() net.Addr { return l.m.advertise }

func (l *raftLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	select {
	case <-l.closed:
		return nil, net.ErrClosed
	default:
	}
	c, err := l.m.dial(string(address), connRaft, timeout)
	if err != nil {
		return nil, fmt.Errorf("dial raft %s: %w", address, err)
	}
	return c, nil
}

var errClosedConn = errors.New("connection closed")

// tlsHandshakeRecord is the first byte of a TLS client hello, which a
// plain-text server reads where it expects a header.
const tlsHandshakeRecord = 0x16
