package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/pki"
)

// credentialFile holds the node's credential in the data dir.
const credentialFile = "credential.json"

// credential is what the agent keeps of its join: the server it joined
// and the reply of POST nodecredentials, whose Servers the agent keeps
// current (servers.go).
type credential struct {
	Server string `json:"server"`
	api.NodeCredential
}

// clientConfig is the API client configuration of the node credential.
func (c *credential) clientConfig() client.Config {
	return client.Config{Server: c.Server, Servers: c.Servers, CAData: []byte(c.CACert), Token: c.Token}
}

// tlsCertificate is the agent's own certificate and key.
func (c *credential) tlsCertificate() (tls.Certificate, error) {
	cert, err := tls.X509KeyPair([]byte(c.Certificate), []byte(c.Key))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("the credential's certificate: %w", err)
	}
	return cert, nil
}

// loadCredential reads the saved credential; (nil, nil) when there is none.
func loadCredential(dataDir string) (*credential, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, credentialFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read credential: %w", err)
	}
	c := new(credential)
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dataDir, credentialFile), err)
	}
	return c, nil
}

// save writes the credential readable by its owner only, atomically.
func (c *credential) save(dataDir string) error {
	if err := writeJSONFile(filepath.Join(dataDir, credentialFile), c); err != nil {
		return fmt.Errorf("write credential: %w", err)
	}
	return nil
}

// join trades the join string for the node's credential. The server is
// trusted by the pin in the join string alone (or by caPEM when the
// token is a bare id.secret and the CA was given as a file).
// parseJoinString is the token and CA pin of a join string; with a CA
// file a bare id.secret token is one too (no pin).
func parseJoinString(s string, haveCA bool) (token, pin string, err error) {
	if haveCA {
		if _, _, err := auth.ParseToken(s); err == nil {
			return s, "", nil
		}
	}
	pin, token, err = auth.ParseJoin(s)
	return token, pin, err
}

func join(ctx context.Context, server, joinString string, caPEM []byte, nodeName string, hosts []string) (*credential, error) {
	var tlsCfg *tls.Config
	token, pin, err := parseJoinString(joinString, len(caPEM) > 0)
	if err != nil {
		return nil, fmt.Errorf("--token: %w", err)
	}
	if pin != "" {
		if tlsCfg, err = pki.PinnedTLSConfig(pin); err != nil {
			return nil, fmt.Errorf("--token: %w", err)
		}
	}
	cl, err := client.New(client.Config{Server: server, CAData: caPEM, TLS: tlsCfg, Token: token})
	if err != nil {
		return nil, fmt.Errorf("--server: %w", err)
	}
	req, err := json.Marshal(&api.NodeCredentialRequest{
		TypeMeta: api.TypeMeta{APIVersion: "outpost.io/v1", Kind: "NodeCredentialRequest"},
		NodeName: nodeName,
		Hosts:    hosts,
	})
	if err != nil {
		return nil, err
	}
	body, _, err := cl.Do(ctx, http.MethodPost, "/apis/outpost.io/v1/nodecredentials", nil, req)
	switch {
	case err == nil:
	case errors.Is(err, pki.ErrPinMismatch):
		return nil, fmt.Errorf("join %s as node %q: the server's CA is not the one the join string names (a join string of another cluster, or someone in between): %w", server, nodeName, err)
	case api.ReasonOf(err) == api.ReasonUnauthorized:
		return nil, fmt.Errorf("join %s as node %q: the join token was refused: it is wrong, expired or deleted; make a new one with `outpost adm token create --role node`: %w", server, nodeName, err)
	default:
		return nil, fmt.Errorf("join %s as node %q: %w", server, nodeName, err)
	}
	c := &credential{Server: server}
	if err := json.Unmarshal(body, &c.NodeCredential); err != nil {
		return nil, fmt.Errorf("join %s: the reply: %w", server, err)
	}
	if c.Token == "" || c.CACert == "" || c.Certificate == "" || c.Key == "" {
		return nil, fmt.Errorf("join %s: %w: the reply lacks a token, CA or certificate", server, ErrBadReply)
	}
	// The CA the agent will trust from now on must be the one it was
	// told to trust.
	if pin != "" {
		block, _ := pem.Decode([]byte(c.CACert))
		if block == nil {
			return nil, fmt.Errorf("join %s: %w: the reply's CA is not PEM", server, ErrBadReply)
		}
		ca, err := x509.ParseCertificate(block.Bytes)
		if err != nil || pki.Hash(ca) != pin {
			return nil, fmt.Errorf("join %s: %w: the reply's CA does not match the join string's pin", server, ErrBadReply)
		}
	}
	return c, nil
}
