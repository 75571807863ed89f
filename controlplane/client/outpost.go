package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// RaftPeer is one member of the control plane's raft configuration as the
// server reports it.
type RaftPeer struct {
	ID        string `json:"id"`
	Address   string `json:"address"`
	APIAddr   string `json:"apiAddr,omitempty"`
	Suffrage  string `json:"suffrage"`
	Leader    bool   `json:"leader"`
	LastIndex uint64 `json:"lastIndex"`
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
	// Version is the release the server runs; Info what its status says
	// of its binary (self-update state, the last rolled-back version).
	Version string            `json:"version,omitempty"`
	Info    map[string]string `json:"info,omitempty"`
}

// raftPeerList is the reply of GET /apis/outpost.io/v1/raft/peers.
type raftPeerList struct {
	Items []RaftPeer `json:"items"`
}

// VersionInfo is the reply of GET /version.
type VersionInfo struct {
	Version string `json:"version"`
}

const raftPeersPath = "/apis/outpost.io/v1/raft/peers"

// RaftPeers lists the raft members with their state.
func (c *Client) RaftPeers(ctx context.Context) ([]RaftPeer, error) {
	var l raftPeerList
	if err := c.doJSON(ctx, http.MethodGet, raftPeersPath, &l); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// doJSON sends a request without a body and decodes the reply into out.
func (c *Client) doJSON(ctx context.Context, method, path string, out any) error {
	data, _, err := c.Do(ctx, method, path, nil, nil)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrBadReply, path, err)
	}
	return nil
}

// RaftPromote makes non-voter id a voter. The server refuses (with a
// Status saying why) when the peer has not caught up.
func (c *Client) RaftPromote(ctx context.Context, id string) error {
	_, _, err := c.Do(ctx, http.MethodPost, raftPeersPath+"/"+url.PathEscape(id)+"/promote", nil, nil)
	return err
}

// RaftDemote makes voter id a non-voter, if quorum survives it.
func (c *Client) RaftDemote(ctx context.Context, id string) error {
	_, _, err := c.Do(ctx, http.MethodPost, raftPeersPath+"/"+url.PathEscape(id)+"/demote", nil, nil)
	return err
}

// RaftRemove removes peer id from the raft configuration, if quorum
// survives it.
func (c *Client) RaftRemove(ctx context.Context, id string) error {
	_, _, err := c.Do(ctx, http.MethodDelete, raftPeersPath+"/"+url.PathEscape(id), nil, nil)
	return err
}

// CreateToken stores a token. The caller generates it: tok carries the
// token ID as its name and only the hash of the secret, so the secret
// never leaves the caller.
func (c *Client) CreateToken(ctx context.Context, tok *api.Token) (*api.Token, error) {
	obj, _, err := c.Create(ctx, tok)
	if err != nil {
		return nil, err
	}
	out, ok := obj.(*api.Token)
	if !ok {
		return nil, fmt.Errorf("%w: create token returned %T", ErrBadReply, obj)
	}
	return out, nil
}

// Version asks the server which release it runs.
func (c *Client) Version(ctx context.Context) (VersionInfo, error) {
	data, _, err := c.Do(ctx, http.MethodGet, "/version", nil, nil)
	if err != nil {
		return VersionInfo{}, err
	}
	var v VersionInfo
	if err := json.Unmarshal(data, &v); err != nil {
		return VersionInfo{}, fmt.Errorf("%w: version: %w", ErrBadReply, err)
	}
	return v, nil
}

const serversPath = "/apis/outpost.io/v1/servers"

// APIServers lists the API URLs of the cluster's servers that answer
// (agents fail over between them; see SetServers).
func (c *Client) APIServers(ctx context.Context) ([]string, error) {
	var l api.ServerList
	if err := c.doJSON(ctx, http.MethodGet, serversPath, &l); err != nil {
		return nil, err
	}
	return l.Servers, nil
}

// NodeHeartbeat renews node's liveness on the leader (no raft write).
func (c *Client) NodeHeartbeat(ctx context.Context, node string) (*api.NodeHeartbeat, error) {
	var hb api.NodeHeartbeat
	if err := c.doJSON(ctx, http.MethodPost, "/apis/outpost.io/v1/nodes/"+url.PathEscape(node)+"/heartbeat", &hb); err != nil {
		return nil, err
	}
	return &hb, nil
}

const zonesPath = "/apis/outpost.io/v1/zones"

// Zones is the zones' states as the leader counts them (SPEC TNT-8).
func (c *Client) Zones(ctx context.Context) (*api.ZoneList, error) {
	var l api.ZoneList
	if err := c.doJSON(ctx, http.MethodGet, zonesPath, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// Binary streams the release binary with digest ("sha256:HEX") from the
// API (GET /apis/outpost.io/v1/binaries/DIGEST); the caller closes it
// and checks the bytes against the digest.
func (c *Client) Binary(ctx context.Context, digest string) (io.ReadCloser, error) {
	path := "/apis/outpost.io/v1/binaries/" + url.PathEscape(digest)
	resp, err := c.send(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, ErrorFromReply(resp.StatusCode, data)
	}
	return resp.Body, nil
}
