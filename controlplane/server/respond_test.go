package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/pki"
	"github.com/outpost-edge/outpost/raftstore"
)

// TestStalledBodyIsCutOff: a client that announces a body and stops
// sending it gets a 400 once bodyReadTimeout passed, over HTTP/1.1 (a read
// deadline on the connection) and HTTP/2 (a timer that closes the body),
// instead of holding the handler for as long as it likes.
func TestStalledBodyIsCutOff(t *testing.T) {
	old := bodyReadTimeout
	bodyReadTimeout = 300 * time.Millisecond
	t.Cleanup(func() { bodyReadTimeout = old }) // after the server's Close
	s := startServer(t, testConfig(t))
	for _, tt := range []struct {
		name  string
		http2 bool
	}{{"HTTP/1.1", false}, {"HTTP/2", true}} {
		t.Run(tt.name, func(t *testing.T) {
			tlsCfg, err := pki.ClientTLSConfig(s.CA().CertPEM())
			if err != nil {
				t.Fatal(err)
			}
			tr := &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: tt.http2}
			defer tr.CloseIdleConnections()
			pr, pw := io.Pipe()
			defer pw.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			stop := context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
			defer stop()
			req, err := http.NewRequestWithContext(ctx, "POST", s.URL()+"/api/v1/namespaces/default/pods", pr)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = 1000
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+s.AdminConfig().Token)
			go func() { _, _ = pw.Write([]byte(`{"metadata":`)) }() // then nothing more
			start := time.Now()
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				t.Fatalf("the server did not answer a stalled body: %v", err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.ProtoMajor != map[bool]int{false: 1, true: 2}[tt.http2] {
				t.Fatalf("spoke %s, want %s", resp.Proto, tt.name)
			}
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "reading the request body") ||
				!strings.Contains(string(body), "i/o timeout") {
				t.Fatalf("stalled body: %d %s, want 400 saying the body timed out", resp.StatusCode, body)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the stalled body was cut off after %v", d)
			}
		})
	}
}

// A write that failed in a way not known to precede the log may have
// committed: 504, never the 503 that clients (and the linearizability
// checker) read as "not applied" (issue 9 item 6).
func TestWriteOutcomeOnlyCleanFailuresAre503(t *testing.T) {
	cases := []struct {
		err  error
		code int
	}{
		{fmt.Errorf("apply: %w", raftstore.ErrUnknownOutcome), http.StatusGatewayTimeout},
		{fmt.Errorf("apply: %w: %w", raftstore.ErrUnknownOutcome, raftstore.ErrClosed), http.StatusGatewayTimeout},
		{errors.New("transport: connection reset"), http.StatusGatewayTimeout},
		{fmt.Errorf("apply: %w", context.DeadlineExceeded), http.StatusGatewayTimeout},
		{fmt.Errorf("apply: %w", raftstore.ErrNoLeader), http.StatusServiceUnavailable},
		{fmt.Errorf("apply: %w", &raftstore.NotLeaderError{}), http.StatusServiceUnavailable},
		{raftstore.ErrClosed, http.StatusServiceUnavailable},
		{api.NewConflict(api.Resources[0], "x", "stale"), http.StatusConflict},
	}
	for _, tc := range cases {
		if got := statusOf(writeOutcome(tc.err)).Code(); got != tc.code {
			t.Errorf("%v: status %d, want %d", tc.err, got, tc.code)
		}
	}
}
