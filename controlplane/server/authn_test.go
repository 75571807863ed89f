package server

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/testing/syncbuf"
)

// Every authentication failure gets the same bare 401: a reply that told
// an unknown token ID from a wrong secret would let a prober find which
// token IDs exist. The reason is in the server's debug log only.
func TestAuthenticationFailuresAllLookAlike(t *testing.T) {
	cfg := testConfig(t)
	var logs syncbuf.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := startServer(t, cfg)
	c := admin(t, s)
	tok := addToken(t, c, api.TokenSpec{Role: api.RoleDeveloper, Namespaces: []string{"default"}})
	known, _, _ := auth.ParseToken(tok)
	adminID, _, _ := auth.ParseToken(s.AdminConfig().Token)

	var first []byte
	for _, tt := range []struct {
		name, header, secretID string
	}{
		{"no credentials", "", ""},
		{"unknown token", "Bearer zzzzzz.0123456789abcdef0123", "zzzzzz"},
		{"wrong secret of a stored token", "Bearer " + known + ".0123456789abcdef0123", known},
		{"wrong secret of the admin token", "Bearer " + adminID + ".0123456789abcdef0123", adminID},
		{"malformed token", "Bearer garbage", ""},
		{"other scheme", "Basic YWRtaW46YWRtaW4=", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := c.as("").do("GET", "/api/v1/namespaces/default/pods", nil, "Authorization", tt.header)
			st := r.status()
			if r.code != http.StatusUnauthorized || st.Message != "Unauthorized" || st.Reason != api.ReasonUnauthorized {
				t.Fatalf("got %d %s, want 401 with message \"Unauthorized\"", r.code, r.body)
			}
			if first == nil {
				first = r.body
			} else if !bytes.Equal(r.body, first) {
				t.Errorf("replies differ:\n%s\n%s", first, r.body)
			}
			if tt.secretID != "" && bytes.Contains(r.body, []byte(tt.secretID)) {
				t.Errorf("the reply names token %s: %s", tt.secretID, r.body)
			}
		})
	}
	if got := logs.String(); !strings.Contains(got, "authentication failed") || !strings.Contains(got, "no token zzzzzz") {
		t.Errorf("the server's debug log lacks the reasons:\n%s", got)
	}
}
