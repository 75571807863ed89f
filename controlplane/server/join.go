package server

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/core"
	"github.com/outpost-edge/outpost/controlplane/pki"
)

// nodeCertTTL is how long an agent's certificate lasts. A year: edge
// hosts may be cut off for long, and the credential's token is what the
// cluster revokes (delete the Token); the certificate only serves the
// agent's endpoint to the control plane.
const nodeCertTTL = 365 * 24 * time.Hour

// serveNodeCredentials answers POST /apis/outpost.io/v1/nodecredentials:
// a join token (a node token without a node) is traded for a node's own
// credential, the way kubeadm join trades a bootstrap token for a kubelet
// certificate. The reply carries the node token, the CA, the agent's
// certificate and the gossip key.
func (s *Server) serveNodeCredentials(w *recorder, r *http.Request, id *auth.Identity, segs []string) {
	w.label(auth.VerbCreate, auth.ResourceNodeCredentials)
	if len(segs) != 0 || r.Method != http.MethodPost {
		writeError(w, api.NewMethodNotAllowed(r.Method+" is not supported on "+r.URL.Path+" (POST "+"/apis/outpost.io/v1/nodecredentials)"))
		return
	}
	if err := auth.Authorize(id, auth.Request{Verb: auth.VerbCreate, Group: "outpost.io", Resource: auth.ResourceNodeCredentials}, nil); err != nil {
		writeError(w, api.NewForbidden(err.Error()))
		return
	}
	if s.forwardIfFollower(w, r) {
		return
	}
	body, err := readBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		writeError(w, err)
		return
	}
	var req api.NodeCredentialRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, api.NewBadRequest("the body must be a NodeCredentialRequest: "+err.Error()))
		return
	}
	var errs api.ErrorList
	if req.NodeName == "" {
		errs = append(errs, api.Required(api.Root("nodeName"), "the node to make a credential for"))
	} else if msgs := api.IsDNS1123Subdomain(req.NodeName); len(msgs) > 0 {
		errs = append(errs, api.Invalid(api.Root("nodeName"), req.NodeName, fmt.Sprint(msgs)))
	}
	if len(errs) > 0 {
		writeError(w, api.NewInvalid("NodeCredentialRequest", req.NodeName, errs))
		return
	}
	cert, err := s.ca.IssueNodeCert(req.NodeName, req.Hosts, nodeCertTTL)
	if err != nil {
		writeError(w, api.NewInvalid("NodeCredentialRequest", req.NodeName, api.ErrorList{api.Invalid(api.Root("hosts"), req.Hosts, err.Error())}))
		return
	}
	certPEM, keyPEM, err := pki.EncodePEM(cert)
	if err != nil {
		writeError(w, api.NewInternalError(err))
		return
	}
	tokID, secret := auth.NewToken()
	tok := &api.Token{
		ObjectMeta: api.ObjectMeta{Name: tokID},
		Spec: api.TokenSpec{
			Role:        api.RoleNode,
			NodeName:    req.NodeName,
			SecretHash:  auth.HashSecret(secret),
			Description: fmt.Sprintf("credential of node %s, from join token %s", req.NodeName, id.Name),
		},
	}
	if _, err := s.core.Create(r.Context(), core.ControlPlane, tok); err != nil {
		writeError(w, err)
		return
	}
	key, peers := s.GossipKey(), s.GossipAddrs()
	s.log.Info("issued a node credential", "node", req.NodeName, "token", tokID, "joinToken", id.Name)
	writeJSON(w, http.StatusCreated, &api.NodeCredential{
		TypeMeta:    api.TypeMeta{APIVersion: "outpost.io/v1", Kind: "NodeCredential"},
		NodeName:    req.NodeName,
		Token:       tokID + "." + secret,
		CACert:      string(s.ca.CertPEM()),
		Certificate: string(certPEM),
		Key:         string(keyPEM),
		GossipKey:   base64.StdEncoding.EncodeToString(key),
		GossipPeers: peers,
		Servers:     s.ServerURLs(r.Context()),
	})
}
