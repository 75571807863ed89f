package ociarchive

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func demo() Image {
	return Image{
		Name:       "outpost.local/demo:1",
		Files:      []File{{Path: "/bin/app", Mode: 0o755, Data: []byte("#!binary")}, {Path: "etc/motd", Data: []byte("hi\n")}},
		Entrypoint: []string{"/bin/app"},
		Cmd:        []string{"serve"},
		Env:        []string{"A=1"},
		WorkingDir: "/",
	}
}

func TestBuildReadRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	if err := Build(&buf, demo()); err != nil {
		t.Fatal(err)
	}
	got, err := Read(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("read %d images, want 1", len(got))
	}
	g := got[0]
	want := demo()
	if g.Name != want.Name || !reflect.DeepEqual(g.Entrypoint, want.Entrypoint) || !reflect.DeepEqual(g.Cmd, want.Cmd) ||
		!reflect.DeepEqual(g.Env, want.Env) || g.WorkingDir != want.WorkingDir {
		t.Errorf("read back %+v, want %+v", g.Image, want)
	}
	files := map[string]File{}
	for _, f := range g.Files {
		files[f.Path] = f
	}
	if f := files["/bin/app"]; string(f.Data) != "#!binary" || f.Mode != 0o755 {
		t.Errorf("/bin/app = %q mode %v", f.Data, f.Mode)
	}
	if f := files["/etc/motd"]; string(f.Data) != "hi\n" || f.Mode != 0o644 {
		t.Errorf("/etc/motd = %q mode %v", f.Data, f.Mode)
	}
	if !strings.HasPrefix(g.Digest, "sha256:") || len(g.Digest) != 71 {
		t.Errorf("digest %q", g.Digest)
	}
}

// The index must carry both name annotations: containerd's importer reads
// io.containerd.image.name, other tools the OCI ref name.
func TestIndexAnnotationsAndLayout(t *testing.T) {
	var buf bytes.Buffer
	if err := Build(&buf, demo()); err != nil {
		t.Fatal(err)
	}
	entries := map[string][]byte{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		entries[h.Name] = b
	}
	if string(entries["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %q", entries["oci-layout"])
	}
	var idx index
	if err := json.Unmarshal(entries["index.json"], &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Manifests) != 1 {
		t.Fatalf("index has %d manifests", len(idx.Manifests))
	}
	a := idx.Manifests[0].Annotations
	if a[AnnotationRefName] != "outpost.local/demo:1" || a[AnnotationContainerdName] != "outpost.local/demo:1" {
		t.Errorf("annotations %v", a)
	}
	blobs := 0
	for name := range entries {
		if strings.HasPrefix(name, "blobs/sha256/") && len(name) > len("blobs/sha256/") {
			blobs++
		}
	}
	if blobs != 3 {
		t.Errorf("%d blobs, want layer+config+manifest", blobs)
	}
}

func TestBuildIsDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	img := demo()
	if err := Build(&a, img); err != nil {
		t.Fatal(err)
	}
	img.Files[0], img.Files[1] = img.Files[1], img.Files[0]
	if err := Build(&b, img); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("the same image in another file order gave different bytes")
	}
}

func TestBuildRejectsBadInput(t *testing.T) {
	for name, img := range map[string]Image{
		"no name":      {Files: []File{{Path: "/a"}}},
		"empty path":   {Name: "x:1", Files: []File{{Path: "/"}}},
		"dotdot":       {Name: "x:1", Files: []File{{Path: "../etc/passwd"}}},
		"twice":        {Name: "x:1", Files: []File{{Path: "/a"}, {Path: "a"}}},
		"file and dir": {Name: "x:1", Files: []File{{Path: "/a"}, {Path: "/a/b"}}},
	} {
		if err := Build(io.Discard, img); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

func TestReadRejectsCorruptArchives(t *testing.T) {
	var buf bytes.Buffer
	if err := Build(&buf, demo()); err != nil {
		t.Fatal(err)
	}
	// Corrupt one byte of the last blob (the manifest): its digest no
	// longer matches.
	raw := buf.Bytes()
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		if strings.HasPrefix(h.Name, "blobs/sha256/") && len(b) > 0 && b[0] == '{' && bytes.Contains(b, []byte(MediaTypeManifest)) {
			b[len(b)-2] ^= 1
		}
		_ = tw.WriteHeader(h)
		_, _ = tw.Write(b)
	}
	_ = tw.Close()
	if _, err := Read(&out); !errors.Is(err, ErrInvalid) {
		t.Errorf("corrupt manifest: err = %v, want ErrInvalid", err)
	}
	if _, err := Read(strings.NewReader("not a tar")); !errors.Is(err, ErrInvalid) {
		t.Errorf("garbage: err = %v, want ErrInvalid", err)
	}
}
