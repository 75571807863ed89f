package raftstore

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

// A read index whose last known leader cannot be connected to is "no
// leader"; a deadline of the caller's is not.
func TestUnreachable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for err, want := range map[error]bool{
		fmt.Errorf("ReadIndex 127.0.0.1:1: %w", refused):                  true,
		fmt.Errorf("ReadIndex 127.0.0.1:1: %w", io.EOF):                   true,
		fmt.Errorf("ReadIndex 127.0.0.1:1: %w", context.DeadlineExceeded): false,
		&remoteError{msg: "boom"}:                                         false,
	} {
		if got := unreachable(err); got != want {
			t.Errorf("unreachable(%v) = %v, want %v", err, got, want)
		}
	}
}
