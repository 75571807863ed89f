package pki

import (
	"context"
	"crypto/tls"
	"log/slog"
	"math/big"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A running server's certificate is issued again two thirds into its
// life, not only at start (issue 9 item 10), and retried after a failure.
func TestRenewingRenewsBeforeExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ca := mustCA(t, testSecret)
		var fail atomic.Bool
		r, err := NewRenewing(func() (tls.Certificate, error) {
			if fail.Load() {
				return tls.Certificate{}, ErrBadRequest
			}
			return ca.IssueServerCert("s1", nil, 90*24*time.Hour)
		})
		if err != nil {
			t.Fatal(err)
		}
		first := r.Current().Leaf
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go r.Run(ctx, slog.New(slog.DiscardHandler))

		time.Sleep(59 * 24 * time.Hour)
		synctest.Wait()
		if r.Current().Leaf != first {
			t.Fatal("renewed after 59 of 90 days, before two thirds of its life")
		}
		time.Sleep(2 * 24 * time.Hour)
		synctest.Wait()
		second := r.Current().Leaf
		if second == first || !second.NotAfter.After(first.NotAfter) {
			t.Fatalf("not renewed after 61 of 90 days: serial %v, not after %v", second.SerialNumber, second.NotAfter)
		}

		// The next renewal fails at first: the certificate in use stays,
		// and a retry a minute later succeeds.
		fail.Store(true)
		time.Sleep(time.Until(r.RenewAt()) + time.Second)
		synctest.Wait()
		if r.Current().Leaf != second {
			t.Fatal("a failed renewal replaced the certificate")
		}
		fail.Store(false)
		time.Sleep(renewRetry)
		synctest.Wait()
		if r.Current().Leaf == second {
			t.Fatal("a failed renewal was not retried")
		}
		cancel()
	})
}

// TLS configurations that use a Renewing certificate present the new one
// from the next handshake on, as server and as client, with no restart.
func TestRenewingServesTheNewCertificate(t *testing.T) {
	ca := mustCA(t, testSecret)
	r, err := NewRenewing(func() (tls.Certificate, error) { return ca.IssueServerCert("s1", nil, time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	other, err := ca.IssueServerCert("s2", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := PeerTLSConfigs(ca, tls.Certificate{})
	_, cli := PeerTLSConfigs(ca, other)
	r.Use(srv)
	var seen atomic.Pointer[big.Int]
	cli.VerifyConnection = func(cs tls.ConnectionState) error {
		seen.Store(cs.PeerCertificates[0].SerialNumber)
		return verifyPeerOU(cs)
	}
	for range 2 {
		want := r.Current().Leaf.SerialNumber
		if se, ce := handshake(t, srv, cli); se != nil || ce != nil {
			t.Fatalf("handshake: server %v client %v", se, ce)
		}
		if got := seen.Load(); got.Cmp(want) != 0 {
			t.Fatalf("server presented serial %v, want the current %v", got, want)
		}
		if err := r.Renew(); err != nil {
			t.Fatal(err)
		}
	}
}
