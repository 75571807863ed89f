package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// A payload in an OCI registry (UPD-3), named as skopeo names an image
// in one: docker://HOST[:PORT]/REPOSITORY@sha256:DIGEST, pinned by the
// digest of the release's manifest. It is pulled through the
// distribution API into an OCI layout directory: the manifest, its
// config and layers, and its signatures, found through the referrers
// API (OCI 1.1), which `oras attach` or a mirror of a layout written by
// outpost puts there. Every blob is checked against its digest as it
// arrives. Credentials come from the auth file podman and docker write
// ($REGISTRY_AUTH_FILE, else ~/.docker/config.json): HTTP basic, or the
// bearer token a registry's challenge asks for. A registry on a loopback
// address is spoken to over plain HTTP, as docker does; any other over
// HTTPS.

// RegistryScheme prefixes a payload reference in an OCI registry.
const RegistryScheme = "docker://"

// maxManifest bounds a manifest or referrers index read from a registry,
// maxSignatures the signatures pulled for one payload.
const (
	maxManifest   = 4 << 20
	maxSignatures = 16
)

// registryRef is a parsed docker:// reference.
type registryRef struct {
	host, repo, digest string
}

func parseRegistryRef(ref string) (registryRef, error) {
	rest, ok := strings.CutPrefix(ref, RegistryScheme)
	if !ok {
		return registryRef{}, fmt.Errorf("%q is not a %sHOST/REPOSITORY@sha256:DIGEST reference", ref, RegistryScheme)
	}
	loc, digest := SplitRef(rest)
	host, repo, ok := strings.Cut(loc, "/")
	if !ok || host == "" || repo == "" || digest == "" || !api.PinnedByDigest(ref) || strings.Contains(repo, "..") {
		return registryRef{}, fmt.Errorf("%q: a registry payload is named %sHOST/REPOSITORY@sha256:DIGEST (pinned by its digest)", ref, RegistryScheme)
	}
	return registryRef{host: host, repo: repo, digest: digest}, nil
}

// registryClient speaks the distribution API to one repository.
type registryClient struct {
	ref    registryRef
	base   string // scheme://host/v2/repo
	user   string
	pass   string
	bearer string
}

func newRegistryClient(ref registryRef) *registryClient {
	scheme := "https"
	if h, _, err := net.SplitHostPort(ref.host); err == nil && isLoopback(h) || isLoopback(ref.host) {
		scheme = "http"
	}
	c := &registryClient{ref: ref, base: scheme + "://" + ref.host + "/v2/" + ref.repo}
	c.user, c.pass = registryCredentials(ref.host)
	return c
}

func isLoopback(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// registryCredentials finds host's user and password in the auth file.
func registryCredentials(host string) (string, string) {
	path := os.Getenv("REGISTRY_AUTH_FILE")
	if path == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", ""
		}
		path = filepath.Join(home, ".docker", "config.json")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", ""
	}
	var f struct {
		Auths map[string]struct {
			Auth string `json:"auth"`
		} `json:"auths"`
	}
	if json.Unmarshal(b, &f) != nil {
		return "", ""
	}
	a, ok := f.Auths[host]
	if !ok {
		return "", ""
	}
	raw, err := base64.StdEncoding.DecodeString(a.Auth)
	if err != nil {
		return "", ""
	}
	u, p, _ := strings.Cut(string(raw), ":")
	return u, p
}

// get fetches path under the repository, answering a bearer challenge
// once; the caller closes the body of a 200.
func (c *registryClient) get(ctx context.Context, path, accept string) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
		if err != nil {
			return nil, err
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		switch {
		case c.bearer != "":
			req.Header.Set("Authorization", "Bearer "+c.bearer)
		case c.user != "":
			req.SetBasicAuth(c.user, c.pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode == http.StatusOK {
			return resp, nil
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized && attempt == 0 && c.bearer == "" {
			if ch := resp.Header.Get("WWW-Authenticate"); strings.HasPrefix(strings.ToLower(ch), "bearer ") {
				if err := c.token(ctx, ch); err != nil {
					return nil, fmt.Errorf("%s: %w", c.ref.host, err)
				}
				continue
			}
		}
		return nil, fmt.Errorf("GET %s%s: %s: %s", c.base, path, resp.Status, strings.TrimSpace(string(b)))
	}
}

// token asks the challenge's realm for a pull token of the repository.
func (c *registryClient) token(ctx context.Context, challenge string) error {
	params := map[string]string{}
	for part := range strings.SplitSeq(challenge[len("bearer "):], ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if ok {
			params[strings.ToLower(k)] = strings.Trim(v, `"`)
		}
	}
	realm, err := url.Parse(params["realm"])
	if err != nil || params["realm"] == "" {
		return fmt.Errorf("a bearer challenge without a realm: %q", challenge)
	}
	q := realm.Query()
	if s := params["service"]; s != "" {
		q.Set("service", s)
	}
	q.Set("scope", "repository:"+c.ref.repo+":pull")
	realm.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, realm.String(), nil)
	if err != nil {
		return err
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("token from %s: %s", realm.Host, resp.Status)
	}
	var t struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&t); err != nil {
		return fmt.Errorf("token from %s: %w", realm.Host, err)
	}
	c.bearer = t.Token
	if c.bearer == "" {
		c.bearer = t.AccessToken
	}
	return nil
}

// blob copies the blob (or manifest) d into the layout dir, checking its
// digest and size.
func (c *registryClient) blob(ctx context.Context, dir, kind string, d ocispec.Descriptor) ([]byte, error) {
	resp, err := c.get(ctx, "/"+kind+"/"+d.Digest.String(), d.MediaType)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	hexd := d.Digest.Encoded()
	if d.Digest.Algorithm() != "sha256" || len(hexd) != 64 {
		return nil, fmt.Errorf("%w: digest %s is not sha256", ErrInvalid, d.Digest)
	}
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(filepath.Join(dir, "blobs", "sha256"), ".pull-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	h := sha256.New()
	var keep bytes.Buffer
	w := io.MultiWriter(f, h)
	if kind == "manifests" {
		w = io.MultiWriter(f, h, &keep)
	}
	limit := int64(MaxPayload)
	if kind == "manifests" {
		limit = maxManifest
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, limit+1))
	if err == nil && n > limit {
		err = fmt.Errorf("larger than %d bytes", limit)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", kind, d.Digest, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != hexd || (d.Size > 0 && n != d.Size) {
		return nil, fmt.Errorf("%w: %s %s from %s is sha256:%s (%d bytes)", ErrDigest, kind, d.Digest, c.ref.host, got, n)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, "blobs", "sha256", hexd)); err != nil {
		return nil, err
	}
	return keep.Bytes(), nil
}

// pullRegistry pulls the payload ref names into a layout directory
// under dir and returns its path.
func pullRegistry(ctx context.Context, ref, dir string) (string, error) {
	r, err := parseRegistryRef(ref)
	if err != nil {
		return "", err
	}
	// A registry that stalls must not hold the update's check forever.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	c := newRegistryClient(r)
	root := pulledDir(dir, r.digest)
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", err
	}
	rel := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digestOf(strings.TrimPrefix(r.digest, "sha256:")), ArtifactType: ArtifactType}
	mb, err := c.blob(ctx, root, "manifests", rel)
	if err != nil {
		return "", err
	}
	rel.Size = int64(len(mb))
	var m ocispec.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return "", fmt.Errorf("%w: manifest %s: %w", ErrInvalid, r.digest, err)
	}
	for _, d := range append([]ocispec.Descriptor{m.Config}, m.Layers...) {
		if _, err := c.blob(ctx, root, "blobs", d); err != nil {
			return "", err
		}
	}
	index := ocispec.Index{Manifests: []ocispec.Descriptor{rel}}
	index.SchemaVersion = 2
	index.MediaType = ocispec.MediaTypeImageIndex
	sigs, err := c.referrers(ctx, r.digest)
	if err != nil {
		return "", err
	}
	for _, sd := range sigs {
		smb, err := c.blob(ctx, root, "manifests", sd)
		if err != nil {
			return "", err
		}
		var sm ocispec.Manifest
		if err := json.Unmarshal(smb, &sm); err != nil {
			return "", fmt.Errorf("%w: signature manifest %s: %w", ErrInvalid, sd.Digest, err)
		}
		for _, d := range append([]ocispec.Descriptor{sm.Config}, sm.Layers...) {
			if _, err := c.blob(ctx, root, "blobs", d); err != nil {
				return "", err
			}
		}
		index.Manifests = append(index.Manifests, ocispec.Descriptor{MediaType: sd.MediaType, Digest: sd.Digest, Size: sd.Size, ArtifactType: SignatureArtifactType})
	}
	ib, err := json.Marshal(index)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(root, "index.json"), ib, 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(root, ocispec.ImageLayoutFile), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		return "", err
	}
	return root, nil
}

// referrers lists the signature manifests whose subject is digest; a
// registry without the referrers API has none to give.
func (c *registryClient) referrers(ctx context.Context, digest string) ([]ocispec.Descriptor, error) {
	resp, err := c.get(ctx, "/referrers/"+digest+"?artifactType="+url.QueryEscape(SignatureArtifactType), ocispec.MediaTypeImageIndex)
	if err != nil {
		if strings.Contains(err.Error(), ": 404 ") {
			return nil, nil
		}
		return nil, err
	}
	defer resp.Body.Close()
	var idx ocispec.Index
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxManifest)).Decode(&idx); err != nil {
		return nil, fmt.Errorf("%w: referrers of %s: %w", ErrInvalid, digest, err)
	}
	var out []ocispec.Descriptor
	for _, d := range idx.Manifests {
		if d.ArtifactType == SignatureArtifactType && len(out) < maxSignatures {
			out = append(out, d)
		}
	}
	return out, nil
}

// pulledDir is where a payload pulled from a registry is kept:
// dir/<hex of its digest>/, an OCI layout.
func pulledDir(dir, digest string) string {
	return filepath.Join(dir, strings.TrimPrefix(digest, "sha256:"))
}
