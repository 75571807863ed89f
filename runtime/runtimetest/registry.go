package runtimetest

import (
	"archive/tar"
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// Registry is a minimal OCI distribution registry on 127.0.0.1 serving
// one OCI layout (pull only: its first manifest by tag, every manifest
// by digest, the referrers API) behind HTTP basic auth, for pull tests.
type Registry struct {
	// Host is host:port to put in image references and RegistryAuth.
	Host string
	// Repo is the repository it serves ("runtimetest/pulled"); Ref is
	// Host/Repo:Tag.
	Repo, Tag, Ref string
	// Digest is the manifest's digest.
	Digest string
	// pulls counts manifest requests that passed authentication.
	pulls atomic.Int64
}

// NewRegistry serves archive (an OCI layout as ociarchive builds it) until
// the test ends. Every request must carry user:password.
func NewRegistry(t *testing.T, archive []byte, user, password string) *Registry {
	t.Helper()
	blobs := map[string][]byte{}
	var index []byte
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("registry: read archive: %v", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("registry: read archive: %v", err)
		}
		switch {
		case h.Name == "index.json":
			index = b
		case strings.HasPrefix(h.Name, "blobs/sha256/") && len(h.Name) > len("blobs/sha256/"):
			blobs["sha256:"+strings.TrimPrefix(h.Name, "blobs/sha256/")] = b
		}
	}
	var idx struct {
		Manifests []struct {
			MediaType string `json:"mediaType"`
			Digest    string `json:"digest"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(index, &idx); err != nil || len(idx.Manifests) == 0 {
		t.Fatalf("registry: index.json: %v (%d manifests)", err, len(idx.Manifests))
	}
	// The tag names the first manifest; every manifest is served by
	// its digest, and those with a subject through the referrers API
	// (OCI 1.1), as signatures are found.
	manifest := idx.Manifests[0]
	mediaTypes := map[string]string{}
	referrers := map[string][]map[string]any{}
	for _, m := range idx.Manifests {
		mediaTypes[m.Digest] = m.MediaType
		var body struct {
			ArtifactType string `json:"artifactType"`
			Subject      *struct {
				Digest string `json:"digest"`
			} `json:"subject"`
		}
		if json.Unmarshal(blobs[m.Digest], &body) == nil && body.Subject != nil {
			referrers[body.Subject.Digest] = append(referrers[body.Subject.Digest], map[string]any{
				"mediaType": m.MediaType, "digest": m.Digest, "size": len(blobs[m.Digest]), "artifactType": body.ArtifactType})
		}
	}
	reg := &Registry{Repo: "runtimetest/pulled", Tag: "1", Digest: manifest.Digest}
	mux := http.NewServeMux()
	mux.HandleFunc("/v2/", func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(user)) != 1 || subtle.ConstantTimeCompare([]byte(p), []byte(password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="runtimetest"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED"}]}`, http.StatusUnauthorized)
			return
		}
		path := strings.TrimPrefix(r.URL.Path, "/v2/")
		if path == "" {
			w.WriteHeader(http.StatusOK)
			return
		}
		rest, ok := strings.CutPrefix(path, reg.Repo+"/")
		if !ok {
			http.Error(w, `{"errors":[{"code":"NAME_UNKNOWN"}]}`, http.StatusNotFound)
			return
		}
		kind, ref, _ := strings.Cut(rest, "/")
		var body []byte
		var mediaType, digest string
		switch {
		case kind == "manifests" && ref == reg.Tag:
			body, mediaType, digest = blobs[manifest.Digest], manifest.MediaType, manifest.Digest
			reg.pulls.Add(1)
		case kind == "manifests" && mediaTypes[ref] != "":
			body, mediaType, digest = blobs[ref], mediaTypes[ref], ref
			reg.pulls.Add(1)
		case kind == "referrers":
			ref, _, _ = strings.Cut(ref, "?")
			list := referrers[ref]
			if list == nil {
				list = []map[string]any{}
			}
			body, _ = json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": list})
			mediaType = "application/vnd.oci.image.index.v1+json"
		case kind == "blobs" && blobs[ref] != nil:
			body, mediaType, digest = blobs[ref], "application/octet-stream", ref
		default:
			http.Error(w, `{"errors":[{"code":"MANIFEST_UNKNOWN"}]}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", mediaType)
		w.Header().Set("Docker-Content-Digest", digest)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(body)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	reg.Host = strings.TrimPrefix(srv.URL, "http://")
	reg.Ref = reg.Host + "/" + reg.Repo + ":" + reg.Tag
	return reg
}
