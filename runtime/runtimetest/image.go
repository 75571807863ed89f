package runtimetest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"testing"

	"github.com/outpost-edge/outpost/runtime/ociarchive"
)

// TestImageRef is the name of the suite's image.
const TestImageRef = "outpost.local/runtimetest:1"

// TestBinPath is where the test binary sits in the image; the image's
// entrypoint is [TestBinPath] and its cmd ["sleep"].
const TestBinPath = "/testbin"

// ImageEnv is set in the image's config; the suite checks that a
// container sees it next to its own env.
const ImageEnv = "RUNTIMETEST_IMAGE=1"

var (
	buildOnce sync.Once
	archive   []byte
	buildErr  error
)

// TestImage returns the suite's image as an OCI archive, building the test
// binary the first time (go's build cache makes later runs quick).
func TestImage(t testing.TB) []byte {
	t.Helper()
	buildOnce.Do(func() { archive, buildErr = buildImage() })
	if buildErr != nil {
		t.Fatalf("build the test image: %v", buildErr)
	}
	return archive
}

func buildImage() ([]byte, error) {
	dir, err := os.MkdirTemp("", "runtimetest-bin")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "testbin")
	goBin := filepath.Join(goruntime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	cmd := exec.Command(goBin, "build", "-trimpath", "-o", bin, "github.com/outpost-edge/outpost/runtime/runtimetest/testbin")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build testbin: %w\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("read testbin: %w", err)
	}
	var buf bytes.Buffer
	err = ociarchive.Build(&buf, ociarchive.Image{
		Name: TestImageRef,
		Files: []ociarchive.File{
			{Path: TestBinPath, Mode: 0o755, Data: data},
			{Path: "/testdir/.keep", Data: []byte{}},
			{Path: "/mnt/.keep", Data: []byte{}},
		},
		Entrypoint: []string{TestBinPath},
		Cmd:        []string{"sleep"},
		Env:        []string{"PATH=/", ImageEnv},
	})
	if err != nil {
		return nil, fmt.Errorf("pack testbin: %w", err)
	}
	return buf.Bytes(), nil
}
