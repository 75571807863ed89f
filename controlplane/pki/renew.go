package pki

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// renewRetry is how long Renewing.Run waits after a failed renewal.
const renewRetry = time.Minute

// Renewing is a certificate issued again before it expires, for a
// process that runs longer than a certificate lasts: a server on a shelf
// in a cell tower is not restarted once a year. TLS configurations that
// Use it pick the current certificate at every handshake, so renewal
// needs no restart and drops no connection.
type Renewing struct {
	issue func() (tls.Certificate, error)
	cur   atomic.Pointer[tls.Certificate]
}

// NewRenewing issues the first certificate with issue, which Renew and
// Run call again later.
func NewRenewing(issue func() (tls.Certificate, error)) (*Renewing, error) {
	r := &Renewing{issue: issue}
	if err := r.Renew(); err != nil {
		return nil, err
	}
	return r, nil
}

// Current is the certificate in use.
func (r *Renewing) Current() *tls.Certificate { return r.cur.Load() }

// Renew issues a new certificate now; handshakes from then on use it.
func (r *Renewing) Renew() error {
	c, err := r.issue()
	if err != nil {
		return fmt.Errorf("issuing certificate: %w", err)
	}
	if c.Leaf == nil {
		return fmt.Errorf("issuing certificate: %w: no parsed leaf", ErrBadRequest)
	}
	r.cur.Store(&c)
	return nil
}

// RenewAt is when the current certificate is due for renewal: two thirds
// into its life, so that a renewal that keeps failing has months to be
// noticed and fixed before the certificate expires.
func (r *Renewing) RenewAt() time.Time {
	leaf := r.Current().Leaf
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	return leaf.NotBefore.Add(life * 2 / 3)
}

// Use makes cfgs present the current certificate: as a server
// (GetCertificate) and as a client (GetClientCertificate).
func (r *Renewing) Use(cfgs ...*tls.Config) {
	for _, cfg := range cfgs {
		cfg.Certificates = nil
		cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return r.Current(), nil }
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return r.Current(), nil }
	}
}

// ServeWithFallback makes cfg serve r's certificate to clients that can
// use it and fallback's to the others: after Use, it lets web browsers,
// which do not speak ed25519, reach a server whose certificate is ed25519
// with a P-256 one (IssueBrowserServerCert).
func (r *Renewing) ServeWithFallback(cfg *tls.Config, fallback *Renewing) {
	cfg.GetCertificate = func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		c := r.Current()
		if hello.SupportsCertificate(c) == nil {
			return c, nil
		}
		return fallback.Current(), nil
	}
}

// Run renews the certificate when it is due until ctx ends, retrying a
// failed renewal every minute.
func (r *Renewing) Run(ctx context.Context, log *slog.Logger) {
	for {
		wait := time.Until(r.RenewAt())
		t := time.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		for {
			err := r.Renew()
			if err == nil {
				leaf := r.Current().Leaf
				log.Info("certificate renewed", "subject", leaf.Subject.CommonName, "not_after", leaf.NotAfter)
				break
			}
			log.Error("certificate renewal failed; retrying", "err", err, "expires", r.Current().Leaf.NotAfter)
			select {
			case <-ctx.Done():
				return
			case <-time.After(renewRetry):
			}
		}
	}
}
