package server

import (
	"context"
	"net/http"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/store"
)

// The built-in admin token is derived from the cluster secret, and its
// generation lives in the replicated store (the admin Token object's
// annotation, see auth.AdminTokenGeneration). Every server authenticates
// the generation in force as a static token and keeps its admin.conf on
// it: after catching up at start (before the first request), and whenever
// the object changes, so a rotation revokes the old secret on every server
// as it applies the rotation.

// adminIdentity is who the admin token authenticates as.
var adminIdentity = auth.Identity{Name: "admin", Role: api.RoleClusterAdmin}

// adminConfig returns the admin client config of the generation in force.
func (s *Server) adminConfig() client.Config {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	return s.admin
}

// syncAdminToken makes this server authenticate the admin token's
// generation in force, and no other, and rewrites admin.conf when the
// generation changed.
func (s *Server) syncAdminToken() {
	// Read under the lock: two syncs at once (a rotation's reply and the
	// watch) must not install the older generation last.
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	tok, gen := s.core.AdminToken()
	if tok == nil {
		return // before the bootstrap: generation 0, as set at start
	}
	if gen == s.adminGen {
		return
	}
	id, secret := auth.AdminTokenGeneration(s.secret, gen)
	if err := s.authn.AddStatic(id+"."+secret, adminIdentity); err != nil {
		s.log.Error("the admin token of the generation in force cannot be used", "generation", gen, "err", err)
		return
	}
	s.adminGen = gen
	s.admin.Token = id + "." + secret
	if err := client.WriteConfig(s.cfg.AdminConfigPath, s.admin); err != nil {
		s.log.Error("admin token rotated, but admin.conf could not be rewritten", "generation", gen, "path", s.cfg.AdminConfigPath, "err", err)
		return
	}
	s.log.Info("admin token: generation in force changed; the previous one no longer authenticates here", "generation", gen, "admin_config", s.cfg.AdminConfigPath)
}

// followAdminToken keeps the admin token on the generation in force while
// ctx lasts, once the server has caught up.
func (s *Server) followAdminToken(ctx context.Context) {
	if err := s.core.WaitCaughtUp(ctx); err != nil {
		return
	}
	// Token ids are [a-z0-9]: the selector cannot fail to parse.
	only, _ := api.ParseFieldSelector(tokensResource, "metadata.name="+s.adminTokenID)
	for ctx.Err() == nil {
		// Watch first, then sync: a change between the two is seen twice
		// rather than missed.
		ch, err := s.core.Watch(ctx, tokensResource, "", store.ListOptions{Field: only}, 0, false)
		if err != nil {
			s.log.Warn("watching the admin token failed; retrying", "err", err)
			controller.Sleep(ctx, time.Second)
			continue
		}
		s.syncAdminToken()
		for ev := range ch {
			if ev.Type == api.Error {
				break // dropped or a snapshot restored: watch again
			}
			s.syncAdminToken()
		}
	}
}

// serveAdminToken answers POST /apis/outpost.io/v1/admintoken/rotate.
func (s *Server) serveAdminToken(w *recorder, r *http.Request, id *auth.Identity, segs []string) {
	w.label(verbCreate, "admintoken")
	if len(segs) != 1 || segs[0] != "rotate" {
		writeError(w, notFoundPath())
		return
	}
	if r.Method != http.MethodPost {
		writeError(w, api.NewMethodNotAllowed(r.Method+" is not supported on "+r.URL.Path+": POST rotates the admin token"))
		return
	}
	gen, err := s.core.RotateAdminToken(r.Context(), id, func(gen int) string {
		_, secret := auth.AdminTokenGeneration(s.secret, gen)
		return auth.HashSecret(secret)
	})
	if err != nil {
		s.failWrite(w, r, nil, err)
		return
	}
	// This server has applied the rotation: it stops taking the old
	// secret before it answers.
	s.syncAdminToken()
	tid, secret := auth.AdminTokenGeneration(s.secret, gen)
	s.log.Info("admin token rotated", "user", id.Name, "generation", gen)
	writeJSON(w, http.StatusCreated, &api.AdminTokenRotation{
		TypeMeta:   api.TypeMeta{Kind: "AdminTokenRotation", APIVersion: "outpost.io/v1"},
		Generation: gen,
		Token:      tid + "." + secret,
	})
}
