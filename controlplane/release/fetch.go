package release

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// PayloadRef is a payload's reference as a graph names it: where it is,
// pinned by its digest (URL@sha256:HEX), as an image is by a pull spec.
func PayloadRef(location, digest string) string { return location + "@" + digest }

// SplitRef splits a reference into its location and digest ("" when it
// names none).
func SplitRef(ref string) (location, digest string) {
	if i := strings.LastIndex(ref, "@sha256:"); i >= 0 {
		return ref[:i], ref[i+1:]
	}
	return ref, ""
}

// MaxPayload bounds a fetched payload (Open reads an archive into
// memory).
const MaxPayload = 512 << 20

// Fetch copies the payload ref names (an http(s):// or file:// URL, or a
// path, optionally @sha256:DIGEST; or docker://HOST/REPOSITORY@sha256:
// DIGEST in an OCI registry, registry.go) into dir and opens it; a
// digest in ref must be the payload's. The file is dir/<digest>.tar (a
// registry's payload: the layout dir/<digest>/).
func Fetch(ctx context.Context, ref, dir string) (*Payload, error) {
	if strings.HasPrefix(ref, RegistryScheme) {
		root, err := pullRegistry(ctx, ref, dir)
		if err != nil {
			return nil, fmt.Errorf("payload %s: %w", ref, err)
		}
		p, err := Open(root)
		if err != nil {
			return nil, fmt.Errorf("payload %s: %w", ref, err)
		}
		if _, want := SplitRef(ref); p.Digest != want {
			return nil, fmt.Errorf("%w: payload %s is %s", ErrDigest, ref, p.Digest)
		}
		return p, nil
	}
	loc, want := SplitRef(ref)
	u, err := url.Parse(loc)
	if err != nil {
		return nil, fmt.Errorf("payload %s: %w", ref, err)
	}
	var src string
	switch u.Scheme {
	case "http", "https":
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		tmp, err := os.CreateTemp(dir, ".fetch-")
		if err != nil {
			return nil, err
		}
		defer os.Remove(tmp.Name())
		if err := download(ctx, loc, tmp); err != nil {
			_ = tmp.Close()
			return nil, fmt.Errorf("payload %s: %w", ref, err)
		}
		if err := tmp.Close(); err != nil {
			return nil, err
		}
		src = tmp.Name()
	case "file", "":
		src = u.Path
		if u.Scheme == "" {
			src = loc
		}
	default:
		return nil, fmt.Errorf("payload %s: the scheme %q is not fetched (http, https, file)", ref, u.Scheme)
	}
	p, err := Open(src)
	if err != nil {
		return nil, fmt.Errorf("payload %s: %w", ref, err)
	}
	if want != "" && p.Digest != want {
		return nil, fmt.Errorf("%w: payload %s is %s", ErrDigest, ref, p.Digest)
	}
	// Kept by digest in dir, for the steps after (the servers hand out
	// its binaries to agents) and a restart, whatever becomes of the
	// source (a removable disk, say).
	final := filepath.Join(dir, strings.TrimPrefix(p.Digest, "sha256:")+".tar")
	switch {
	case strings.HasPrefix(src, dir+string(filepath.Separator)):
		if err := os.Rename(src, final); err != nil {
			return nil, err
		}
	default:
		if _, err := os.Stat(final); err == nil {
			break
		}
		if err := keepCopy(src, dir, final); err != nil {
			return nil, fmt.Errorf("payload %s: keeping a copy: %w", ref, err)
		}
	}
	if p, err = Open(final); err != nil {
		return nil, err
	}
	return p, nil
}

// keepCopy writes the payload at src (a tar, or a layout directory) to
// final as a tar, through a temporary file in dir.
func keepCopy(src, dir, final string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".keep-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if st, err := os.Stat(src); err == nil && st.IsDir() {
		err = WriteTar(tmp, src)
	} else if err == nil {
		var f *os.File
		if f, err = os.Open(src); err == nil {
			_, err = io.Copy(tmp, f)
			f.Close()
		}
	}
	if err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), final)
}

func download(ctx context.Context, u string, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	return httpGet(ctx, u, "", w, MaxPayload)
}

// graphLimit bounds an update graph's size.
const graphLimit = 16 << 20

// GetGraph reads an update graph: a file:// URL from disk, an http(s)://
// one asking for JSON, as Cincinnati's clients do.
func GetGraph(ctx context.Context, u string) ([]byte, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return nil, err
	}
	if pu.Scheme == "file" {
		return os.ReadFile(pu.Path)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var b bytes.Buffer
	if err := httpGet(ctx, u, "application/json", &b, graphLimit); err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	return b.Bytes(), nil
}

// httpGet copies u's body to w, at most limit bytes; a status other than
// 200 is an error with the start of the body.
func httpGet(ctx context.Context, u, accept string, w io.Writer, limit int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return err
	}
	if n > limit {
		return fmt.Errorf("larger than %d bytes", limit)
	}
	return nil
}
