package release

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// The media and artifact types of a payload's parts.
const (
	ArtifactType          = "application/vnd.outpost.release.v1"
	SignatureArtifactType = "application/vnd.outpost.release.signature.v1"
	mediaMetadata         = "application/vnd.outpost.release.metadata.v1+json"
	mediaManifest         = "application/vnd.outpost.release.manifest.v1+yaml"
	mediaImageRefs        = "application/vnd.outpost.release.image-references.v1+json"
	mediaBinary           = "application/vnd.outpost.release.binary.v1"
	mediaSignature        = "application/vnd.outpost.release.signature.v1"
	mediaEmpty            = "application/vnd.oci.empty.v1+json"
	annotationPlatform    = "io.outpost.release.platform"
)

// Errors of reading and verifying a payload.
var (
	// ErrInvalid is a payload (or a build's input) that is not well
	// formed: the message says what and where.
	ErrInvalid = errors.New("invalid release payload")
	// ErrDigest is a blob whose bytes do not have the digest or size its
	// descriptor names: the payload was changed or damaged.
	ErrDigest = errors.New("release payload digest mismatch")
	// ErrUnsigned is a payload with no signature.
	ErrUnsigned = errors.New("release payload is not signed")
	// ErrSignature is a payload whose signatures none of the trusted keys
	// verifies.
	ErrSignature = errors.New("no trusted key verifies the release payload's signature")
)

// Metadata is the release's metadata, in OpenShift's release-metadata
// shape.
type Metadata struct {
	Kind     string            `json:"kind"`
	Version  string            `json:"version"`
	Previous []string          `json:"previous,omitempty"`
	Next     []string          `json:"next,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// MetadataKind is the kind OpenShift's release-metadata carries.
const MetadataKind = "cincinnati-metadata-v0"

// ImageReferences pins the images a release names, in the shape of
// OpenShift's image-references (an ImageStream): each tag's from.name is
// an image by digest (repo@sha256:...).
type ImageReferences struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Tags []ImageTag `json:"tags"`
	} `json:"spec"`
}

// ImageTag is one image of a release: an add-on's image, or a pool's OS
// image (named os-<pool>).
type ImageTag struct {
	Name string `json:"name"`
	From struct {
		Kind string `json:"kind"`
		Name string `json:"name"`
	} `json:"from"`
}

// File is a named file of a payload.
type File struct {
	Name string `json:"name"`
	Data []byte `json:"-"`
}

// Binary is the outpost binary for one platform ("linux/amd64").
type Binary struct {
	Platform string `json:"platform"`
	Digest   string `json:"digest"`
	Size     int64  `json:"size"`
}

// Input is what a release is built from.
type Input struct {
	Metadata  Metadata
	Manifests []File
	Images    []ImageTag
	// Binaries are the outpost binaries: platform ("linux/amd64") →
	// path of the file.
	Binaries map[string]string
	Created  time.Time
}

// platformArchs are the architectures outpost binaries are built for.
var platformArchs = []string{"amd64", "arm64", "arm", "riscv64", "ppc64le", "s390x"}

// manifestName is 0000_<runlevel>_<component>_<name>.yaml (or .yml,
// .json), as OpenShift names a release's manifests.
var manifestName = regexp.MustCompile(`^0000_([0-9]{2})_([a-z0-9][a-z0-9-]*)_([A-Za-z0-9._-][A-Za-z0-9._-]*)\.(yaml|yml|json)$`)

// ParseManifestName returns a manifest file's runlevel and component.
func ParseManifestName(name string) (runlevel int, component string, ok bool) {
	m := manifestName.FindStringSubmatch(name)
	if m == nil {
		return 0, "", false
	}
	rl, _ := strconv.Atoi(m[1])
	return rl, m[2], true
}

// CheckManifests decodes and validates every manifest as the API would
// and returns every problem, by file and field.
func CheckManifests(files []File) []string {
	var problems []string
	seen := map[string]bool{}
	objects := map[string]string{} // kind namespace/name → file
	for _, f := range files {
		if seen[f.Name] {
			problems = append(problems, fmt.Sprintf("%s: named twice", f.Name))
		}
		seen[f.Name] = true
		if _, _, ok := ParseManifestName(f.Name); !ok {
			problems = append(problems, fmt.Sprintf("%s: a manifest is named 0000_<runlevel: two digits>_<component>_<name>.yaml", f.Name))
			continue
		}
		objs, _, err := api.DecodeYAMLOrJSON(f.Data)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", f.Name, err))
			continue
		}
		if len(objs) == 0 {
			problems = append(problems, fmt.Sprintf("%s: no object", f.Name))
		}
		for i, o := range objs {
			id := o.GetTypeMeta().Kind + " " + o.GetObjectMeta().Namespace + "/" + o.GetObjectMeta().Name
			if prev, dup := objects[id]; dup {
				problems = append(problems, fmt.Sprintf("%s: object %d (%s %s) is in %s too", f.Name, i+1, o.GetTypeMeta().Kind, o.GetObjectMeta().Name, prev))
			}
			objects[id] = f.Name
			api.SetDefaults(o) // as the API does before it validates
			for _, e := range api.Validate(o) {
				problems = append(problems, fmt.Sprintf("%s: object %d (%s %s): %s", f.Name, i+1, o.GetTypeMeta().Kind, o.GetObjectMeta().Name, e.Error()))
			}
		}
	}
	return problems
}

// Build writes a payload for in as an OCI image layout in the directory
// dst (which must not exist or be empty) and returns its digest.
func Build(dst string, in Input) (string, error) {
	var problems []string
	if in.Metadata.Version == "" {
		problems = append(problems, "metadata: a version is required")
	}
	if in.Metadata.Kind == "" {
		in.Metadata.Kind = MetadataKind
	}
	problems = append(problems, CheckManifests(in.Manifests)...)
	for i, t := range in.Images {
		if t.Name == "" {
			problems = append(problems, fmt.Sprintf("images[%d].name: required", i))
		}
		if !api.PinnedByDigest(t.From.Name) {
			problems = append(problems, fmt.Sprintf("images[%d].from.name: %q is not pinned by its digest (repository@sha256:<64 hex digits>)", i, t.From.Name))
		}
	}
	if len(in.Binaries) == 0 {
		problems = append(problems, "binaries: a release carries the outpost binary of at least one platform (--binary linux/amd64=PATH)")
	}
	for platform := range in.Binaries {
		if goos, arch, ok := strings.Cut(platform, "/"); !ok || goos != "linux" || !slices.Contains(platformArchs, arch) {
			problems = append(problems, fmt.Sprintf("binaries: platform %q: outpost runs on linux/ARCH, ARCH one of %s", platform, strings.Join(platformArchs, ", ")))
		}
	}
	if len(problems) > 0 {
		return "", fmt.Errorf("%w:\n  %s", ErrInvalid, strings.Join(problems, "\n  "))
	}
	if ents, err := os.ReadDir(dst); err == nil && len(ents) > 0 {
		return "", fmt.Errorf("%w: %s is not empty", ErrInvalid, dst)
	}
	w := &layoutWriter{dir: dst}
	meta, err := json.MarshalIndent(in.Metadata, "", "  ")
	if err != nil {
		return "", err
	}
	config, err := w.blob(mediaMetadata, meta, nil)
	if err != nil {
		return "", err
	}
	var layers []ocispec.Descriptor
	files := slices.Clone(in.Manifests)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	for _, f := range files {
		d, err := w.blob(mediaManifest, f.Data, map[string]string{ocispec.AnnotationTitle: f.Name})
		if err != nil {
			return "", err
		}
		layers = append(layers, d)
	}
	refs := ImageReferences{Kind: "ImageStream", APIVersion: "image.openshift.io/v1"}
	refs.Metadata.Name = in.Metadata.Version
	refs.Spec.Tags = in.Images
	if refs.Spec.Tags == nil {
		refs.Spec.Tags = []ImageTag{}
	}
	rb, err := json.MarshalIndent(refs, "", "  ")
	if err != nil {
		return "", err
	}
	d, err := w.blob(mediaImageRefs, rb, map[string]string{ocispec.AnnotationTitle: "image-references"})
	if err != nil {
		return "", err
	}
	layers = append(layers, d)
	for _, platform := range slices.Sorted(maps.Keys(in.Binaries)) {
		d, err := w.fileBlob(mediaBinary, in.Binaries[platform], map[string]string{
			ocispec.AnnotationTitle: "outpost-" + strings.ReplaceAll(platform, "/", "-"),
			annotationPlatform:      platform,
		})
		if err != nil {
			return "", err
		}
		layers = append(layers, d)
	}
	created := in.Created
	if created.IsZero() {
		created = time.Now()
	}
	m := ocispec.Manifest{
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: ArtifactType,
		Config:       config,
		Layers:       layers,
		Annotations: map[string]string{
			ocispec.AnnotationCreated: created.UTC().Format(time.RFC3339),
			ocispec.AnnotationVersion: in.Metadata.Version,
		},
	}
	m.SchemaVersion = 2
	mb, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	md, err := w.blob(ocispec.MediaTypeImageManifest, mb, map[string]string{ocispec.AnnotationRefName: in.Metadata.Version})
	if err != nil {
		return "", err
	}
	md.ArtifactType = ArtifactType
	if err := writeIndex(dst, []ocispec.Descriptor{md}); err != nil {
		return "", err
	}
	return md.Digest.String(), nil
}

// layoutWriter writes blobs into an OCI layout directory.
type layoutWriter struct{ dir string }

func (w *layoutWriter) blob(mediaType string, data []byte, ann map[string]string) (ocispec.Descriptor, error) {
	sum := sha256.Sum256(data)
	hexd := hex.EncodeToString(sum[:])
	p := filepath.Join(w.dir, "blobs", "sha256", hexd)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return ocispec.Descriptor{}, err
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return ocispec.Descriptor{}, err
	}
	return ocispec.Descriptor{MediaType: mediaType, Digest: digestOf(hexd), Size: int64(len(data)), Annotations: ann}, nil
}

func (w *layoutWriter) fileBlob(mediaType, src string, ann map[string]string) (ocispec.Descriptor, error) {
	f, err := os.Open(src)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("binary: %w", err)
	}
	defer f.Close()
	if err := os.MkdirAll(filepath.Join(w.dir, "blobs", "sha256"), 0o755); err != nil {
		return ocispec.Descriptor{}, err
	}
	tmp, err := os.CreateTemp(filepath.Join(w.dir, "blobs", "sha256"), ".partial-")
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), f)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("binary %s: %w", src, err)
	}
	hexd := hex.EncodeToString(h.Sum(nil))
	if err := os.Rename(tmp.Name(), filepath.Join(w.dir, "blobs", "sha256", hexd)); err != nil {
		return ocispec.Descriptor{}, err
	}
	return ocispec.Descriptor{MediaType: mediaType, Digest: digestOf(hexd), Size: n, Annotations: ann}, nil
}

func writeIndex(dir string, manifests []ocispec.Descriptor) error {
	idx := ocispec.Index{MediaType: ocispec.MediaTypeImageIndex, Manifests: manifests}
	idx.SchemaVersion = 2
	b, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ocispec.ImageLayoutFile), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		return err
	}
	tmp := filepath.Join(dir, ".index.json.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "index.json"))
}

// Payload is a release read from its layout, every blob's digest
// checked.
type Payload struct {
	// Digest names the release: the digest of its manifest.
	Digest    string
	Created   time.Time
	Metadata  Metadata
	Images    ImageReferences
	Manifests []File
	Binaries  []Binary
	// Signatures are the signatures found for Digest, as stored (base64
	// text or raw bytes).
	Signatures [][]byte

	manifest []byte
	src      source
}

// ManifestBytes are the bytes a signature signs (their digest is
// Digest): what `cosign sign-blob` or `openssl dgst` are given.
func (p *Payload) ManifestBytes() []byte { return slices.Clone(p.manifest) }

// source reads a layout's files: a directory, or a tar archive of one
// read into memory.
type source interface {
	read(name string) ([]byte, error)
	open(name string) (io.ReadCloser, error)
}

type dirSource string

func (d dirSource) read(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(string(d), name))
}
func (d dirSource) open(name string) (io.ReadCloser, error) {
	return os.Open(filepath.Join(string(d), name))
}

type tarSource map[string][]byte

func (t tarSource) read(name string) ([]byte, error) {
	b, ok := t[name]
	if !ok {
		return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	return b, nil
}

func (t tarSource) open(name string) (io.ReadCloser, error) {
	b, err := t.read(name)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func readTar(r io.Reader) (tarSource, error) {
	t := tarSource{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return t, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: not a tar archive of an OCI layout: %w", ErrInvalid, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("%w: tar: %w", ErrInvalid, err)
		}
		t[path.Clean(strings.TrimPrefix(h.Name, "./"))] = b
	}
}

// Open reads the payload at src: an OCI layout directory, or a tar
// archive of one (read into memory). Every blob the release manifest
// names is read and its digest and size checked.
func Open(src string) (*Payload, error) {
	st, err := os.Stat(src)
	if err != nil {
		return nil, fmt.Errorf("release payload: %w", err)
	}
	var s source
	if st.IsDir() {
		s = dirSource(src)
	} else {
		f, err := os.Open(src)
		if err != nil {
			return nil, fmt.Errorf("release payload: %w", err)
		}
		t, err := readTar(f)
		_ = f.Close()
		if err != nil {
			return nil, err
		}
		s = t
	}
	return open(s)
}

func open(s source) (*Payload, error) {
	if _, err := s.read("oci-layout"); err != nil {
		return nil, fmt.Errorf("%w: not an OCI image layout (no oci-layout file)", ErrInvalid)
	}
	ib, err := s.read("index.json")
	if err != nil {
		return nil, fmt.Errorf("%w: no index.json: %w", ErrInvalid, err)
	}
	var idx ocispec.Index
	if err := json.Unmarshal(ib, &idx); err != nil {
		return nil, fmt.Errorf("%w: index.json: %w", ErrInvalid, err)
	}
	var rel *ocispec.Descriptor
	var sigs []ocispec.Descriptor
	for i, d := range idx.Manifests {
		switch d.ArtifactType {
		case ArtifactType:
			if rel != nil {
				return nil, fmt.Errorf("%w: index.json names two releases", ErrInvalid)
			}
			rel = &idx.Manifests[i]
		case SignatureArtifactType:
			sigs = append(sigs, d)
		}
	}
	if rel == nil {
		return nil, fmt.Errorf("%w: index.json names no manifest of artifact type %s", ErrInvalid, ArtifactType)
	}
	p := &Payload{Digest: rel.Digest.String(), src: s}
	p.manifest, err = readBlob(s, *rel)
	if err != nil {
		return nil, err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(p.manifest, &m); err != nil {
		return nil, fmt.Errorf("%w: manifest: %w", ErrInvalid, err)
	}
	if m.ArtifactType != ArtifactType || m.Config.MediaType != mediaMetadata {
		return nil, fmt.Errorf("%w: manifest %s is not an outpost release (artifactType %q, config %q)", ErrInvalid, p.Digest, m.ArtifactType, m.Config.MediaType)
	}
	if c := m.Annotations[ocispec.AnnotationCreated]; c != "" {
		p.Created, _ = time.Parse(time.RFC3339, c)
	}
	mb, err := readBlob(s, m.Config)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(mb, &p.Metadata); err != nil {
		return nil, fmt.Errorf("%w: release-metadata: %w", ErrInvalid, err)
	}
	for _, l := range m.Layers {
		switch l.MediaType {
		case mediaManifest:
			b, err := readBlob(s, l)
			if err != nil {
				return nil, err
			}
			if _, _, ok := ParseManifestName(l.Annotations[ocispec.AnnotationTitle]); !ok {
				return nil, fmt.Errorf("%w: a manifest named %q (0000_<runlevel>_<component>_<name>.yaml)", ErrInvalid, l.Annotations[ocispec.AnnotationTitle])
			}
			p.Manifests = append(p.Manifests, File{Name: l.Annotations[ocispec.AnnotationTitle], Data: b})
		case mediaImageRefs:
			b, err := readBlob(s, l)
			if err != nil {
				return nil, err
			}
			if err := json.Unmarshal(b, &p.Images); err != nil {
				return nil, fmt.Errorf("%w: image-references: %w", ErrInvalid, err)
			}
		case mediaBinary:
			if err := checkBlob(s, l); err != nil {
				return nil, err
			}
			p.Binaries = append(p.Binaries, Binary{Platform: l.Annotations[annotationPlatform], Digest: l.Digest.String(), Size: l.Size})
		default:
			return nil, fmt.Errorf("%w: a layer of media type %q", ErrInvalid, l.MediaType)
		}
	}
	for _, sd := range sigs {
		mb, err := readBlob(s, sd)
		if err != nil {
			return nil, err
		}
		var sm ocispec.Manifest
		if err := json.Unmarshal(mb, &sm); err != nil {
			return nil, fmt.Errorf("%w: signature manifest: %w", ErrInvalid, err)
		}
		if sm.Subject == nil || sm.Subject.Digest.String() != p.Digest {
			continue // another release's
		}
		for _, l := range sm.Layers {
			if l.MediaType != mediaSignature {
				continue
			}
			b, err := readBlob(s, l)
			if err != nil {
				return nil, err
			}
			p.Signatures = append(p.Signatures, b)
		}
	}
	return p, nil
}

func blobPath(d ocispec.Descriptor) (string, error) {
	if d.Digest.Algorithm() != "sha256" || d.Digest.Validate() != nil {
		return "", fmt.Errorf("%w: digest %q is not sha256:<64 hex>", ErrInvalid, d.Digest)
	}
	return path.Join("blobs", "sha256", d.Digest.Encoded()), nil
}

func readBlob(s source, d ocispec.Descriptor) ([]byte, error) {
	p, err := blobPath(d)
	if err != nil {
		return nil, err
	}
	if d.Size > 64<<20 {
		return nil, fmt.Errorf("%w: blob %s of %d bytes is too large to read", ErrInvalid, d.Digest, d.Size)
	}
	b, err := s.read(p)
	if err != nil {
		return nil, fmt.Errorf("%w: blob %s: %w", ErrInvalid, d.Digest, err)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != d.Digest.Encoded() || int64(len(b)) != d.Size {
		return nil, fmt.Errorf("%w: blob %s holds %d bytes of digest sha256:%s (the manifest says %d bytes)", ErrDigest, d.Digest, len(b), got, d.Size)
	}
	return b, nil
}

func checkBlob(s source, d ocispec.Descriptor) error {
	p, err := blobPath(d)
	if err != nil {
		return err
	}
	f, err := s.open(p)
	if err != nil {
		return fmt.Errorf("%w: blob %s: %w", ErrInvalid, d.Digest, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("blob %s: %w", d.Digest, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != d.Digest.Encoded() || n != d.Size {
		return fmt.Errorf("%w: blob %s holds %d bytes of digest sha256:%s (the manifest says %d bytes)", ErrDigest, d.Digest, n, got, d.Size)
	}
	return nil
}

// OpenBinary opens the payload's binary for platform; its digest was
// checked by Open, and the caller checks it again as it copies (the
// file may change in between).
func (p *Payload) OpenBinary(platform string) (io.ReadCloser, Binary, error) {
	i := slices.IndexFunc(p.Binaries, func(b Binary) bool { return b.Platform == platform })
	if i < 0 {
		return nil, Binary{}, fmt.Errorf("%w: no outpost binary for %s", ErrInvalid, platform)
	}
	b := p.Binaries[i]
	rc, err := p.src.open(path.Join("blobs", "sha256", strings.TrimPrefix(b.Digest, "sha256:")))
	return rc, b, err
}

// Extract writes the payload's parts into dir as oc adm release
// extract does: the manifests, release-metadata and image-references side
// by side; with binaries, also the binaries named outpost-<os>-<arch>.
func (p *Payload) Extract(dir string, binaries bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	meta, _ := json.MarshalIndent(p.Metadata, "", "  ")
	refs, _ := json.MarshalIndent(p.Images, "", "  ")
	for name, b := range map[string][]byte{"release-metadata": meta, "image-references": refs} {
		if err := os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	for _, f := range p.Manifests { // Open refused any name but 0000_<runlevel>_<component>_<name>
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
			return err
		}
	}
	for _, b := range p.Binaries {
		if !binaries {
			break
		}
		if err := p.extractBinary(b, filepath.Join(dir, "outpost-"+strings.ReplaceAll(b.Platform, "/", "-"))); err != nil {
			return err
		}
	}
	return nil
}

func (p *Payload) extractBinary(b Binary, dst string) error {
	rc, _, err := p.OpenBinary(b.Platform)
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(f, h), rc)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if "sha256:"+hex.EncodeToString(h.Sum(nil)) != b.Digest {
		_ = os.Remove(dst)
		return fmt.Errorf("%w: binary for %s changed while it was extracted", ErrDigest, b.Platform)
	}
	return nil
}

func digestOf(hexd string) digest.Digest { return digest.NewDigestFromEncoded(digest.SHA256, hexd) }
