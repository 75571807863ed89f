package raftstore

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// The outpost RPC protocol runs on connections whose header byte is 'O'.
// Each message is a 4-byte big-endian length and a JSON body; a connection
// carries one request at a time and is pooled by the client.
const (
	rpcStatus    = "Status"
	rpcReadIndex = "ReadIndex"
	rpcJoin      = "Join"
	rpcStateHash = "StateHash"

	maxRPCFrame       = 1 << 20
	rpcIdleTimeout    = 2 * time.Minute
	rpcDefaultTimeout = 10 * time.Second
	rpcMaxTimeout     = 30 * time.Minute
	rpcPoolPerAddr    = 4
)

type rpcRequest struct {
	Method    string          `json:"m"`
	TimeoutMS int64           `json:"t,omitempty"` // the caller's remaining time
	Body      json.RawMessage `json:"b,omitempty"`
}

type rpcResponse struct {
	Error  string          `json:"e,omitempty"`
	Codes  []string        `json:"c,omitempty"` // sentinel errors it matches, see errCodes
	Leader *LeaderInfo     `json:"l,omitempty"` // with code not_leader
	Body   json.RawMessage `json:"b,omitempty"`
}

// errCodes carries sentinel errors across the wire so errors.Is works on
// the caller's side.
var errCodes = []struct {
	code string
	err  error
}{
	{"unknown_outcome", ErrUnknownOutcome},
	{"quorum", ErrQuorum},
	{"not_leader", ErrNotLeader},
	{"no_leader", ErrNoLeader},
	{"closed", ErrClosed},
	{"unknown_server", ErrUnknownServer},
}

func sentinelsOf(codes []string) []error {
	var out []error
	for _, c := range codes {
		for _, e := range errCodes {
			if e.code == c {
				out = append(out, e.err)
			}
		}
	}
	return out
}

// Status is what a server says about itself over the RPC mux.
type Status struct {
	ID           string `json:"id"`
	RaftAddr     string `json:"raftAddr"`
	APIAddr      string `json:"apiAddr,omitempty"`
	LastIndex    uint64 `json:"lastIndex"`
	AppliedIndex uint64 `json:"appliedIndex"`
	CommitIndex  uint64 `json:"commitIndex"`
	Term         uint64 `json:"term"`
	State        string `json:"state"`
	IsLeader     bool   `json:"isLeader"`
	// Bootstrapped reports whether the server already has raft state, so a
	// server with BootstrapExpect joins an existing cluster instead of
	// forming a new one.
	Bootstrapped bool `json:"bootstrapped"`
	// Servers are the IDs of the raft configuration this server holds,
	// so that a server removed without learning it can find out.
	Servers []string `json:"servers,omitempty"`
	// Version is the release the server's binary is; Info what else the
	// server says of itself (its binary's self-update state), both from
	// Config.
	Version string            `json:"version,omitempty"`
	Info    map[string]string `json:"info,omitempty"`
}

// readIndexRequest names the follower asking, so that the leader can
// refuse one it no longer counts as a member: the removed server would
// otherwise wait for entries it will never be sent.
type readIndexRequest struct {
	ID string `json:"id,omitempty"`
}

type readIndexResponse struct {
	Index uint64 `json:"index"`
}

type joinRequest struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	NonVoter bool   `json:"nonVoter,omitempty"`
	// Forwarded marks a request a follower passed on, so it is forwarded at
	// most once.
	Forwarded bool `json:"forwarded,omitempty"`
}

func writeFrame(w *bufio.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	return w.Flush()
}

func readFrame(r *bufio.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxRPCFrame {
		return fmt.Errorf("rpc frame of %d bytes exceeds %d", n, maxRPCFrame)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// rpcHandler serves one method; ctx ends with the caller's timeout or Close.
type rpcHandler func(ctx context.Context, body json.RawMessage) (any, error)

// serveRPC runs the request loop of one accepted connection.
func serveRPC(ctx context.Context, c net.Conn, handlers map[string]rpcHandler) {
	r := bufio.NewReader(c)
	w := bufio.NewWriter(c)
	for {
		_ = c.SetReadDeadline(time.Now().Add(rpcIdleTimeout))
		var req rpcRequest
		if err := readFrame(r, &req); err != nil {
			return
		}
		_ = c.SetReadDeadline(time.Time{})
		timeout := rpcDefaultTimeout
		if req.TimeoutMS > 0 {
			timeout = min(time.Duration(req.TimeoutMS)*time.Millisecond, rpcMaxTimeout)
		}
		resp := rpcResponse{}
		h, ok := handlers[req.Method]
		if !ok {
			resp.Error = fmt.Sprintf("unknown method %q", req.Method)
		} else {
			hctx, cancel := context.WithTimeout(ctx, timeout)
			out, err := h(hctx, req.Body)
			cancel()
			if err != nil {
				resp.Error = err.Error()
				for _, e := range errCodes {
					if errors.Is(err, e.err) {
						resp.Codes = append(resp.Codes, e.code)
					}
				}
				if nl := (*NotLeaderError)(nil); errors.As(err, &nl) && nl.Leader.ID != "" {
					resp.Leader = &nl.Leader
				}
			} else if out != nil {
				b, err := json.Marshal(out)
				if err != nil {
					resp.Error = fmt.Sprintf("encode %s response: %v", req.Method, err)
				} else {
					resp.Body = b
				}
			}
		}
		_ = c.SetWriteDeadline(time.Now().Add(rpcDefaultTimeout))
		if err := writeFrame(w, &resp); err != nil {
			return
		}
	}
}

// remoteError is an error returned by the server side of an RPC.
type remoteError struct {
	addr, method, msg string
	sentinels         []error
}

func (e *remoteError) Error() string {
	return fmt.Sprintf("%s %s: %s", e.method, e.addr, e.msg)
}

func (e *remoteError) Unwrap() []error { return e.sentinels }

// rpcClient keeps a small pool of idle connections per address.
type rpcClient struct {
	m *mux

	mu     sync.Mutex
	idle   map[string][]*rpcConn
	closed bool
}

type rpcConn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

func newRPCClient(m *mux) *rpcClient {
	return &rpcClient{m: m, idle: make(map[string][]*rpcConn)}
}

// get returns an idle pooled connection (pooled=true) or a new one.
func (p *rpcClient) get(ctx context.Context, addr string, fresh bool) (rc *rpcConn, pooled bool, err error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, false, ErrClosed
	}
	if l := p.idle[addr]; len(l) > 0 && !fresh {
		rc := l[len(l)-1]
		p.idle[addr] = l[:len(l)-1]
		p.mu.Unlock()
		return rc, true, nil
	}
	p.mu.Unlock()
	timeout := rpcDefaultTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 {
		return nil, false, context.DeadlineExceeded
	}
	c, err := p.m.dial(addr, connRPC, timeout)
	if err != nil {
		return nil, false, err
	}
	return &rpcConn{c: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}, false, nil
}

func (p *rpcClient) put(addr string, rc *rpcConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle[addr]) >= rpcPoolPerAddr {
		_ = rc.c.Close()
		return
	}
	p.idle[addr] = append(p.idle[addr], rc)
}

// call sends one request and decodes the response body into out.
func (p *rpcClient) call(ctx context.Context, addr, method string, in, out any) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s %s: %w", method, addr, err)
	}
	req := rpcRequest{Method: method}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: encode request: %w", method, addr, err)
		}
		req.Body = b
	}
	deadline, hasDeadline := ctx.Deadline()
	if !hasDeadline {
		deadline = time.Now().Add(rpcDefaultTimeout)
	}
	req.TimeoutMS = time.Until(deadline).Milliseconds()
	var resp rpcResponse
	// A pooled connection may have been closed by the server while idle;
	// one retry on a fresh connection covers that.
	for attempt := 0; ; attempt++ {
		rc, pooled, err := p.get(ctx, addr, attempt > 0)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, addr, err)
		}
		_ = rc.c.SetDeadline(deadline)
		// Cancellation without a deadline still unblocks the read.
		stop := context.AfterFunc(ctx, func() { _ = rc.c.SetDeadline(time.Unix(1, 0)) })
		resp = rpcResponse{}
		err = writeFrame(rc.w, &req)
		if err == nil {
			err = readFrame(rc.r, &resp)
		}
		if stop() && err == nil {
			_ = rc.c.SetDeadline(time.Time{})
			p.put(addr, rc)
			break
		}
		_ = rc.c.Close()
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("%s %s: %w", method, addr, cerr)
		}
		if err == nil {
			err = errClosedConn
		}
		if !pooled || attempt > 0 {
			if p.m.clientTLS == nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)) {
				// A TLS server hangs up on a plain-text hello without a
				// word; the bare EOF would leave the operator guessing.
				return fmt.Errorf("%s %s: %w: the server closed the connection without answering; it may be using TLS "+
					"while this server runs with --insecure (every server of a cluster must agree on --insecure)", method, addr, err)
			}
			return fmt.Errorf("%s %s: %w", method, addr, err)
		}
	}
	if resp.Error != "" {
		if resp.Leader != nil {
			return fmt.Errorf("%s %s: %w", method, addr, &NotLeaderError{Leader: *resp.Leader})
		}
		return &remoteError{addr: addr, method: method, msg: resp.Error, sentinels: sentinelsOf(resp.Codes)}
	}
	if out != nil && len(resp.Body) > 0 {
		if err := json.Unmarshal(resp.Body, out); err != nil {
			return fmt.Errorf("%s %s: decode response: %w", method, addr, err)
		}
	}
	return nil
}

func (p *rpcClient) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, l := range p.idle {
		for _, rc := range l {
			_ = rc.c.Close()
		}
	}
	p.idle = nil
}
