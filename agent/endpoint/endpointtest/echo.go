package endpointtest

import (
	"bufio"
	"errors"
	"io"
	"net"
	"testing"
)

// EchoPort listens on a loopback port standing for a pod's port, for
// port-forward tests: it answers each line with "echo: LINE" and, once
// the caller half-closes, says "bye" and closes. It returns the port;
// the listener closes with the test.
func EchoPort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go echo(conn)
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func echo(conn net.Conn) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	for {
		line, err := br.ReadString('\n')
		if errors.Is(err, io.EOF) {
			_, _ = io.WriteString(conn, "bye\n")
			return
		}
		if err != nil {
			return
		}
		if _, err := io.WriteString(conn, "echo: "+line); err != nil {
			return
		}
	}
}
