package containerd

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/runtime"
	"github.com/outpost-edge/outpost/runtime/runtimetest"
)

// dockerArchive turns the suite's OCI archive into a `docker save` one:
// manifest.json naming the image by RepoTags, the config, and the layer
// uncompressed.
func dockerArchive(t *testing.T, oci []byte, tag string) []byte {
	t.Helper()
	blobs := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(oci))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		blobs[h.Name] = b
	}
	var idx struct {
		Manifests []struct{ Digest string } `json:"manifests"`
	}
	if err := json.Unmarshal(blobs["index.json"], &idx); err != nil {
		t.Fatal(err)
	}
	blob := func(d string) []byte { return blobs["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")] }
	var m struct {
		Config struct{ Digest string }   `json:"config"`
		Layers []struct{ Digest string } `json:"layers"`
	}
	if err := json.Unmarshal(blob(idx.Manifests[0].Digest), &m); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob(m.Layers[0].Digest)))
	if err != nil {
		t.Fatal(err)
	}
	layer, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	cfgName := strings.TrimPrefix(m.Config.Digest, "sha256:") + ".json"
	manifest, _ := json.Marshal([]map[string]any{{"Config": cfgName, "RepoTags": []string{tag}, "Layers": []string{"layer/layer.tar"}}})
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, f := range []struct {
		name string
		data []byte
	}{{"manifest.json", manifest}, {cfgName, blob(m.Config.Digest)}, {"layer/layer.tar", layer}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(f.data)
	}
	tw.Close()
	return out.Bytes()
}

func TestImportDockerArchive(t *testing.T) {
	rt, _ := realRuntime(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const tag = "outpost.local/docker-saved:1"
	imgs, err := rt.ImportImages(ctx, bytes.NewReader(dockerArchive(t, runtimetest.TestImage(t), tag)))
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) != 1 || imgs[0].Names[0] != tag {
		t.Fatalf("imported %+v", imgs)
	}
	spec := runtime.ContainerSpec{ID: "docker-saved", Image: tag, Args: []string{"echo", "from", "docker", "save"},
		Labels: map[string]string{runtime.LabelPodUID: "u1"}}
	defer rt.RemoveContainer(context.Background(), spec.ID)
	if out := runToEnd(ctx, t, rt, spec); out != "from docker save\n" {
		t.Errorf("log %q", out)
	}
}

// `ctr images import` accepts what ociarchive builds and names the image
// from the index's annotations.
func TestCtrImportsOCIArchive(t *testing.T) {
	requireReal(t)
	ctr, err := exec.LookPath("ctr")
	if err != nil {
		if os.Getenv("OUTPOST_TEST_REAL") == "1" {
			t.Fatal("ctr is missing (apt-get install containerd)")
		}
		t.Skip("ctr is not installed")
	}
	root := privateRoot(t)
	sup := startSupervised(t, root)
	defer sup.Stop()
	file := filepath.Join(root, "image.tar")
	if err := os.WriteFile(file, runtimetest.TestImage(t), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(ctr, "-a", sup.Socket(), "-n", "ctr-test", "images", "import", file).CombinedOutput(); err != nil {
		t.Fatalf("ctr images import: %v\n%s", err, out)
	}
	out, err := exec.Command(ctr, "-a", sup.Socket(), "-n", "ctr-test", "images", "ls", "-q").CombinedOutput()
	if err != nil {
		t.Fatalf("ctr images ls: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), runtimetest.TestImageRef) {
		t.Errorf("ctr lists %q, without %s", out, runtimetest.TestImageRef)
	}
}
