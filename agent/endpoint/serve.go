package endpoint

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/outpost-edge/outpost/controlplane/pki"
)

// Errors of this package.
var (
	// ErrNotServer is a client certificate that is not a control-plane
	// server's: only servers may call the agent.
	ErrNotServer = errors.New("client is not an outpost server")
	// ErrNoTLS is Serve called without a TLS configuration: the endpoint
	// never serves plain HTTP, since it would run commands for anyone.
	ErrNoTLS = errors.New("the agent endpoint needs a TLS configuration")
)

// shutdownGrace bounds how long Serve waits for streams when ctx ends.
const shutdownGrace = 5 * time.Second

// TLSConfig is the endpoint's TLS configuration: TLS 1.3, the node's
// certificate, and a client certificate of the cluster CA (pool) with
// organizational unit pki.ServerOU required of every caller.
func TLSConfig(pool *x509.CertPool, cert tls.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion:       tls.VersionTLS13,
		Certificates:     []tls.Certificate{cert},
		ClientAuth:       tls.RequireAndVerifyClientCert,
		ClientCAs:        pool,
		VerifyConnection: verifyServerClient,
	}
}

// verifyServerClient runs after the chain was verified against the CA.
func verifyServerClient(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("%w: no certificate presented", ErrNotServer)
	}
	leaf := cs.PeerCertificates[0]
	if !slices.Contains(leaf.Subject.OrganizationalUnit, pki.ServerOU) {
		return fmt.Errorf("%w: certificate %q lacks organizational unit %q", ErrNotServer, leaf.Subject.CommonName, pki.ServerOU)
	}
	return nil
}

// Serve serves h on ln with tlsCfg (see TLSConfig) until ctx ends, then
// stops: requests in flight see their context end (follows and execs
// stop) and Serve waits up to a few seconds for them.
func Serve(ctx context.Context, ln net.Listener, tlsCfg *tls.Config, h http.Handler, log *slog.Logger) error {
	if tlsCfg == nil {
		return ErrNoTLS
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         tlsCfg.Clone(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		// Refused handshakes (a user's certificate, a scanner) are not
		// worth more than debug.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-errc:
		return fmt.Errorf("agent endpoint: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		err = errors.Join(fmt.Errorf("agent endpoint shutdown: %w", err), srv.Close())
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
