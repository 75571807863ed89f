package ociarchive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Errors of this package.
var (
	// ErrInvalid is an Image that cannot be written (no name, a bad path)
	// or an archive that is not an OCI image layout this package reads.
	ErrInvalid = errors.New("invalid image archive")
)

// Media types and annotations of the OCI image spec (and containerd's
// name annotation), spelled out to keep this package free of deps.
const (
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayerGz  = "application/vnd.oci.image.layer.v1.tar+gzip"
	AnnotationRefName = "org.opencontainers.image.ref.name"
	// AnnotationContainerdName is what containerd's importer reads first
	// for the image's full name.
	AnnotationContainerdName = "io.containerd.image.name"
)

// File is one regular file of the image's only layer. Parent directories
// are created as needed (mode 0755).
type File struct {
	// Path is absolute or relative to the root ("/bin/app" or "bin/app").
	Path string
	// Mode holds the permission bits; 0 means 0644.
	Mode fs.FileMode
	Data []byte
}

// Image is what Build writes. Name is a full reference
// ("outpost.local/demo:1").
type Image struct {
	Name       string
	Files      []File
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	// Architecture defaults to the running GOARCH; OS is always linux.
	Architecture string
}

// Loaded is an image read back from an archive.
type Loaded struct {
	Image
	// Digest is the manifest's digest, as a registry or containerd would
	// report it.
	Digest string
	// Size is the sum of the layer sizes as stored (compressed).
	Size int64
}

// The JSON documents, with only the fields this package writes.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type imageConfig struct {
	Architecture string          `json:"architecture"`
	OS           string          `json:"os"`
	Config       containerConfig `json:"config"`
	RootFS       rootFS          `json:"rootfs"`
}

type containerConfig struct {
	Entrypoint []string `json:"Entrypoint,omitempty"`
	Cmd        []string `json:"Cmd,omitempty"`
	Env        []string `json:"Env,omitempty"`
	WorkingDir string   `json:"WorkingDir,omitempty"`
}

type rootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// epoch is the time on every tar entry, so that the same Image always gives
// the same digests.
var epoch = time.Unix(0, 0).UTC()

// Build writes img as an OCI image layout tar to w. The output is
// deterministic: the same Image gives the same bytes.
func Build(w io.Writer, img Image) error {
	if strings.TrimSpace(img.Name) == "" {
		return fmt.Errorf("%w: name is empty", ErrInvalid)
	}
	layerTar, err := layer(img.Files)
	if err != nil {
		return err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return fmt.Errorf("gzip: %w", err)
	}
	if _, err := zw.Write(layerTar); err != nil {
		return fmt.Errorf("gzip layer: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("gzip layer: %w", err)
	}
	layerGz := gz.Bytes()

	arch := img.Architecture
	if arch == "" {
		arch = runtime.GOARCH
	}
	cfg, err := json.Marshal(imageConfig{
		Architecture: arch,
		OS:           "linux",
		Config: containerConfig{
			Entrypoint: img.Entrypoint,
			Cmd:        img.Cmd,
			Env:        img.Env,
			WorkingDir: img.WorkingDir,
		},
		RootFS: rootFS{Type: "layers", DiffIDs: []string{digestOf(layerTar)}},
	})
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	man, err := json.Marshal(manifest{
		SchemaVersion: 2,
		MediaType:     MediaTypeManifest,
		Config:        descriptor{MediaType: MediaTypeConfig, Digest: digestOf(cfg), Size: int64(len(cfg))},
		Layers:        []descriptor{{MediaType: MediaTypeLayerGz, Digest: digestOf(layerGz), Size: int64(len(layerGz))}},
	})
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	idx, err := json.Marshal(index{
		SchemaVersion: 2,
		MediaType:     MediaTypeIndex,
		Manifests: []descriptor{{
			MediaType: MediaTypeManifest,
			Digest:    digestOf(man),
			Size:      int64(len(man)),
			Annotations: map[string]string{
				AnnotationRefName:        img.Name,
				AnnotationContainerdName: img.Name,
			},
			Platform: &platform{Architecture: arch, OS: "linux"},
		}},
	})
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}

	tw := tar.NewWriter(w)
	put := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		return nil
	}
	dir := func(name string) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, ModTime: epoch, Typeflag: tar.TypeDir, Format: tar.FormatPAX}); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		return nil
	}
	if err := put("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := put("index.json", idx); err != nil {
		return err
	}
	if err := dir("blobs/"); err != nil {
		return err
	}
	if err := dir("blobs/sha256/"); err != nil {
		return err
	}
	for _, b := range [][]byte{layerGz, cfg, man} {
		if err := put("blobs/sha256/"+strings.TrimPrefix(digestOf(b), "sha256:"), b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("close archive: %w", err)
	}
	return nil
}

// layer returns the uncompressed layer tar of files, with their parent
// directories, sorted so the bytes do not depend on the input order.
func layer(files []File) ([]byte, error) {
	dirs := map[string]bool{}
	byPath := map[string]File{}
	for i, f := range files {
		p := strings.TrimPrefix(path.Clean("/"+f.Path), "/")
		if p == "" || p == "." || strings.HasPrefix(f.Path, "../") || strings.Contains(f.Path, "/../") {
			return nil, fmt.Errorf("%w: files[%d].path %q is not a file path", ErrInvalid, i, f.Path)
		}
		if _, dup := byPath[p]; dup {
			return nil, fmt.Errorf("%w: files[%d].path %q given twice", ErrInvalid, i, f.Path)
		}
		byPath[p] = f
		for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for p := range byPath {
		if dirs[p] {
			return nil, fmt.Errorf("%w: path %q is both a file and a directory", ErrInvalid, p)
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirList := make([]string, 0, len(dirs))
	for d := range dirs {
		dirList = append(dirList, d)
	}
	sort.Strings(dirList)
	for _, d := range dirList {
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Mode: 0o755, ModTime: epoch, Typeflag: tar.TypeDir, Format: tar.FormatPAX}); err != nil {
			return nil, fmt.Errorf("layer dir %s: %w", d, err)
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		f := byPath[p]
		mode := f.Mode.Perm()
		if mode == 0 {
			mode = 0o644
		}
		if err := tw.WriteHeader(&tar.Header{Name: p, Mode: int64(mode), Size: int64(len(f.Data)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return nil, fmt.Errorf("layer file %s: %w", p, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, fmt.Errorf("layer file %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return buf.Bytes(), nil
}

// maxBlob bounds what Read holds in memory per blob (the archives this
// package deals with are small).
const maxBlob = 512 << 20

// Read parses an OCI image layout archive (as Build writes it; several
// manifests in index.json are fine, nested indexes are not) and returns its
// images with their files.
func Read(r io.Reader) ([]Loaded, error) {
	blobs := map[string][]byte{}
	var idxData []byte
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if name != "index.json" && !strings.HasPrefix(name, "blobs/sha256/") {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(tr, maxBlob+1))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, name, err)
		}
		if len(data) > maxBlob {
			return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrInvalid, name, maxBlob)
		}
		if name == "index.json" {
			idxData = data
		} else {
			blobs["sha256:"+strings.TrimPrefix(name, "blobs/sha256/")] = data
		}
	}
	if idxData == nil {
		return nil, fmt.Errorf("%w: no index.json (not an OCI image layout)", ErrInvalid)
	}
	var idx index
	if err := json.Unmarshal(idxData, &idx); err != nil {
		return nil, fmt.Errorf("%w: index.json: %w", ErrInvalid, err)
	}
	blob := func(d descriptor, what string) ([]byte, error) {
		b, ok := blobs[d.Digest]
		if !ok {
			return nil, fmt.Errorf("%w: %s blob %s missing", ErrInvalid, what, d.Digest)
		}
		if digestOf(b) != d.Digest {
			return nil, fmt.Errorf("%w: %s blob %s does not match its digest", ErrInvalid, what, d.Digest)
		}
		return b, nil
	}
	var out []Loaded
	for i, md := range idx.Manifests {
		if md.MediaType != MediaTypeManifest && md.MediaType != "application/vnd.docker.distribution.manifest.v2+json" {
			return nil, fmt.Errorf("%w: manifests[%d] has media type %q", ErrInvalid, i, md.MediaType)
		}
		mb, err := blob(md, "manifest")
		if err != nil {
			return nil, err
		}
		var m manifest
		if err := json.Unmarshal(mb, &m); err != nil {
			return nil, fmt.Errorf("%w: manifest %s: %w", ErrInvalid, md.Digest, err)
		}
		cb, err := blob(m.Config, "config")
		if err != nil {
			return nil, err
		}
		var cfg imageConfig
		if err := json.Unmarshal(cb, &cfg); err != nil {
			return nil, fmt.Errorf("%w: config %s: %w", ErrInvalid, m.Config.Digest, err)
		}
		name := md.Annotations[AnnotationContainerdName]
		if name == "" {
			name = md.Annotations[AnnotationRefName]
		}
		l := Loaded{Digest: md.Digest, Image: Image{
			Name:         name,
			Entrypoint:   cfg.Config.Entrypoint,
			Cmd:          cfg.Config.Cmd,
			Env:          cfg.Config.Env,
			WorkingDir:   cfg.Config.WorkingDir,
			Architecture: cfg.Architecture,
		}}
		for _, ld := range m.Layers {
			lb, err := blob(ld, "layer")
			if err != nil {
				return nil, err
			}
			l.Size += int64(len(lb))
			files, err := readLayer(lb)
			if err != nil {
				return nil, fmt.Errorf("%w: layer %s: %w", ErrInvalid, ld.Digest, err)
			}
			l.Files = append(l.Files, files...)
		}
		out = append(out, l)
	}
	return out, nil
}

func readLayer(gz []byte) ([]File, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	tr := tar.NewReader(zr)
	var files []File
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("tar: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(tr, maxBlob))
		if err != nil {
			return nil, fmt.Errorf("tar %s: %w", h.Name, err)
		}
		files = append(files, File{Path: "/" + strings.TrimPrefix(path.Clean("/"+h.Name), "/"), Mode: fs.FileMode(h.Mode).Perm(), Data: data})
	}
}
