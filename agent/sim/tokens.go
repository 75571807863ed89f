package sim

import (
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// tokenInfo separates the node tokens derived here from anything else
// derived from the same admin token.
const tokenInfo = "outpost sim node token v1\x00"

const tokenAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

var tokensResource = api.ResourceForKind("Token")

// nodeToken derives the id and secret of node name's credential from the
// admin token. A restarted simulation computes the same token and finds
// it stored, so restarts do not pile up tokens; nobody without the admin
// token can compute it.
func nodeToken(adminToken, name string) (id, secret string, err error) {
	n := auth.IDLen + auth.SecretLen
	b, err := hkdf.Key(sha256.New, []byte(adminToken), nil, tokenInfo+name, n*8)
	if err != nil {
		return "", "", fmt.Errorf("derive token of node %q: %w", name, err)
	}
	out := make([]byte, n)
	for i := range out {
		// 8 bytes per character: the modulo bias of 2^64 mod 36 is negligible.
		out[i] = tokenAlphabet[binary.BigEndian.Uint64(b[i*8:])%uint64(len(tokenAlphabet))]
	}
	return string(out[:auth.IDLen]), string(out[auth.IDLen:]), nil
}

// tokenSpec is the spec of node name's credential.
func tokenSpec(name, hash string) api.TokenSpec {
	return api.TokenSpec{
		Role:        api.RoleNode,
		NodeName:    name,
		SecretHash:  hash,
		Description: "outpost sim agent of node " + name,
	}
}

// ensureToken returns a working credential for node name: the derived
// token, reused if stored (existing holds the tokens listed at start),
// repaired if stored with another secret or expired, created if absent.
// If the derived id belongs to another holder, a random token is made.
func (a *Agents) ensureToken(ctx context.Context, name string, existing map[string]*api.Token) (string, error) {
	id, secret, err := nodeToken(a.cfg.Client.Token, name)
	if err != nil {
		return "", err
	}
	hash := auth.HashSecret(secret)
	if t := existing[id]; t != nil {
		if t.Spec.Role != api.RoleNode || t.Spec.NodeName != name {
			return a.randomToken(ctx, name)
		}
		expired := t.Spec.Expires != nil && !t.Spec.Expires.IsZero() && !time.Now().Before(t.Spec.Expires.Time)
		if t.Spec.SecretHash == hash && !expired {
			return id + "." + secret, nil
		}
		upd := &api.Token{ObjectMeta: api.ObjectMeta{Name: id, ResourceVersion: t.ResourceVersion}, Spec: tokenSpec(name, hash)}
		if _, _, err := a.admin.Update(ctx, upd); err != nil {
			return "", fmt.Errorf("update token of node %q: %w", name, err)
		}
		return id + "." + secret, nil
	}
	t := &api.Token{ObjectMeta: api.ObjectMeta{Name: id}, Spec: tokenSpec(name, hash)}
	_, err = a.admin.CreateToken(ctx, t)
	switch {
	case err == nil:
		return id + "." + secret, nil
	case api.IsAlreadyExists(err):
		// Created since the list: by an earlier attempt of ours whose
		// reply was lost, or by someone else. Look at it.
		obj, gerr := a.admin.Get(ctx, tokensResource, "", id, client.GetOptions{})
		if gerr != nil {
			return "", fmt.Errorf("read token of node %q: %w", name, gerr)
		}
		cur, ok := obj.(*api.Token)
		if !ok {
			return "", fmt.Errorf("read token of node %q: got %T: %w", name, obj, ErrBadReply)
		}
		return a.ensureToken(ctx, name, map[string]*api.Token{id: cur})
	default:
		return "", fmt.Errorf("create token of node %q: %w", name, err)
	}
}

// randomToken makes a fresh token for node name when its derived id is
// taken by another holder (one chance in some hundred thousand per node).
// It is not found again after a restart.
func (a *Agents) randomToken(ctx context.Context, name string) (string, error) {
	for attempt := 0; ; attempt++ {
		id, secret := auth.NewToken()
		t := &api.Token{ObjectMeta: api.ObjectMeta{Name: id}, Spec: tokenSpec(name, auth.HashSecret(secret))}
		_, err := a.admin.CreateToken(ctx, t)
		if err == nil {
			return id + "." + secret, nil
		}
		if !api.IsAlreadyExists(err) || attempt >= 3 {
			return "", fmt.Errorf("create token of node %q: %w", name, err)
		}
	}
}

// listTokens reads the stored tokens once, so that registering thousands
// of nodes does not ask for each token separately.
func (a *Agents) listTokens(ctx context.Context) (map[string]*api.Token, error) {
	objs, _, err := a.admin.List(ctx, tokensResource, "", client.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list tokens (the simulation needs a cluster-admin token): %w", err)
	}
	out := make(map[string]*api.Token, len(objs))
	for _, o := range objs {
		if t, ok := o.(*api.Token); ok {
			out[t.Name] = t
		}
	}
	return out, nil
}
