package raftstore

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// rpcPair starts a mux serving handlers and a client mux dialing it.
func rpcPair(t *testing.T, handlers map[string]rpcHandler) (*rpcClient, string) {
	t.Helper()
	cfg := Config{BindAddr: "127.0.0.1:0", Insecure: true}
	srv, err := newMux(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv.handleRPC = func(c net.Conn) { serveRPC(ctx, c, handlers) }
	srv.serve()
	cli, err := newMux(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	c := newRPCClient(cli)
	t.Cleanup(func() {
		c.Close()
		cancel()
		_ = srv.Close()
		_ = cli.Close()
	})
	return c, srv.advertise.String()
}

func TestRPCCarriesResultsAndSentinelErrors(t *testing.T) {
	leader := LeaderInfo{ID: "s1", RaftAddr: "127.0.0.1:1", APIAddr: "https://a:1"}
	c, addr := rpcPair(t, map[string]rpcHandler{
		"Echo": func(_ context.Context, b json.RawMessage) (any, error) {
			var s string
			if err := json.Unmarshal(b, &s); err != nil {
				return nil, err
			}
			return strings.ToUpper(s), nil
		},
		"Quorum": func(context.Context, json.RawMessage) (any, error) {
			return nil, fmt.Errorf("%w: refusing to remove voter %q", ErrQuorum, "s2")
		},
		"NotLeader": func(context.Context, json.RawMessage) (any, error) {
			return nil, &NotLeaderError{Leader: leader}
		},
		"NoLeader": func(context.Context, json.RawMessage) (any, error) {
			return nil, fmt.Errorf("%w: %w", &NotLeaderError{}, ErrNoLeader)
		},
		"Slow": func(ctx context.Context, _ json.RawMessage) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
	})
	ctx := ctxT(t, 5*time.Second)
	// Several calls reuse pooled connections.
	for i := range 3 {
		var out string
		if err := c.call(ctx, addr, "Echo", fmt.Sprint("hi", i), &out); err != nil || out != fmt.Sprint("HI", i) {
			t.Fatalf("Echo = %q, %v", out, err)
		}
	}
	err := c.call(ctx, addr, "Quorum", nil, nil)
	if !errors.Is(err, ErrQuorum) || !strings.Contains(err.Error(), `refusing to remove voter "s2"`) {
		t.Errorf("Quorum: %v", err)
	}
	err = c.call(ctx, addr, "NotLeader", nil, nil)
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.Leader != leader || !errors.Is(err, ErrNotLeader) {
		t.Errorf("NotLeader: %v", err)
	}
	err = c.call(ctx, addr, "NoLeader", nil, nil)
	if !errors.Is(err, ErrNotLeader) || !errors.Is(err, ErrNoLeader) {
		t.Errorf("NoLeader: %v, want both ErrNotLeader and ErrNoLeader", err)
	}
	if err := c.call(ctx, addr, "Nope", nil, nil); err == nil || !strings.Contains(err.Error(), "unknown method") {
		t.Errorf("unknown method: %v", err)
	}
	// The caller's deadline travels with the request and bounds the handler.
	start := time.Now()
	err = c.call(ctxT(t, 100*time.Millisecond), addr, "Slow", nil, nil)
	if err == nil || time.Since(start) > 3*time.Second {
		t.Errorf("Slow: %v after %s", err, time.Since(start))
	}
	// The connection pool recovers from the broken call.
	var out string
	if err := c.call(ctx, addr, "Echo", "again", &out); err != nil || out != "AGAIN" {
		t.Fatalf("Echo after timeout = %q, %v", out, err)
	}
}

func TestRPCRejectsOversizedFrame(t *testing.T) {
	_, addr := rpcPair(t, map[string]rpcHandler{})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	var hdr [5]byte
	hdr[0] = connRPC
	binary.BigEndian.PutUint32(hdr[1:], maxRPCFrame+1)
	if _, err := conn.Write(hdr[:]); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := bufio.NewReader(conn).ReadByte(); err == nil {
		t.Fatal("server answered an oversized frame instead of closing")
	}
}

func TestUnknownConnectionHeaderIsClosed(t *testing.T) {
	_, addr := rpcPair(t, map[string]rpcHandler{})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	if _, err := conn.Read(b[:]); err == nil {
		t.Fatal("connection with an unknown header stayed open")
	}
}
