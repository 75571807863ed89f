package server

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/release"
	"github.com/outpost-edge/outpost/selfupdate"
)

// GET /apis/outpost.io/v1/binaries/sha256:HEX hands out an outpost
// binary of a release by its digest (SPEC UPD-6): agents download the
// binary the cluster version controller named for them from the API,
// with their node credential, rather than from the release's source,
// which a site's nodes may not reach. The digest is one the control
// plane took from a payload whose signature it verified, and the agent
// checks the bytes against it. A binary is served from this server's
// own self-update directory when it staged it, else extracted once from
// a payload it fetched (another platform's) into DataDir/binaries.

// ResourceBinaries is the path segment, and the resource name authorized.
const ResourceBinaries = "binaries"

// binaryMu serializes extracting binaries from payloads (each read of a
// tar payload holds it in memory).
var binaryMu sync.Mutex

func (s *Server) serveBinaries(w *recorder, r *http.Request, id *auth.Identity, segs []string) {
	w.label(auth.VerbGet, ResourceBinaries)
	if len(segs) != 1 || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		writeError(w, api.NewMethodNotAllowed(r.Method+" is not supported on "+r.URL.Path+" (GET /apis/outpost.io/v1/binaries/sha256:DIGEST)"))
		return
	}
	digest := segs[0]
	if err := auth.Authorize(id, auth.Request{Verb: auth.VerbGet, Group: "outpost.io", Resource: ResourceBinaries, Name: digest}, nil); err != nil {
		writeError(w, api.NewForbidden(err.Error()))
		return
	}
	hexd, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(hexd) != 64 || !api.PinnedByDigest("x@"+digest) {
		writeError(w, api.NewBadRequest(fmt.Sprintf("%q is not a digest: sha256:<64 hex digits>", digest)))
		return
	}
	path, err := s.binaryFile(hexd)
	if api.IsNotFound(err) && !s.node.IsLeader() {
		// The leader fetched every release it accepted; a follower has
		// only those it updated itself to.
		s.forward(w, r, nil)
		return
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeFile(w, r, path)
}

// binaryFile finds (or extracts) the binary with digest sha256:hexd.
func (s *Server) binaryFile(hexd string) (string, error) {
	var candidates []string
	if s.cfg.BinaryDir != "" {
		candidates = append(candidates, filepath.Join(s.cfg.BinaryDir, "versions", hexd, "outpost"))
	}
	// The cache is a selfupdate layout's versions/ (Stage checks the
	// digest while it writes), never run from.
	cacheDir := filepath.Join(s.cfg.DataDir, "binaries")
	cache := filepath.Join(cacheDir, "versions", hexd, "outpost")
	candidates = append(candidates, cache)
	for _, p := range candidates {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	binaryMu.Lock()
	defer binaryMu.Unlock()
	if _, err := os.Stat(cache); err == nil {
		return cache, nil
	}
	// Fetched payloads: tars, and layouts pulled from a registry.
	tars, _ := filepath.Glob(filepath.Join(s.cfg.DataDir, "releases", "*"))
	for _, t := range tars {
		if strings.HasPrefix(filepath.Base(t), ".") {
			continue
		}
		p, err := release.Open(t)
		if err != nil {
			continue
		}
		for _, b := range p.Binaries {
			if b.Digest != "sha256:"+hexd {
				continue
			}
			rc, _, err := p.OpenBinary(b.Platform)
			if err != nil {
				return "", api.NewInternalError(err)
			}
			defer rc.Close()
			if err := selfupdate.Stage(cacheDir, rc, b.Digest); err != nil {
				return "", api.NewInternalError(err)
			}
			return cache, nil
		}
	}
	return "", api.NewNotFound(&api.Resource{Group: "outpost.io", Plural: ResourceBinaries, Kind: "Binary"}, "sha256:"+hexd)
}
