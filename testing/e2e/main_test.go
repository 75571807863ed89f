package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// outpostBin is the binary under test, built once for the package.
var outpostBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if b := os.Getenv("OUTPOST_BIN"); b != "" {
		outpostBin = b
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "outpost-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	outpostBin = filepath.Join(dir, "outpost")
	cmd := exec.Command("go", "build", "-o", outpostBin, "github.com/outpost-edge/outpost/cmd/outpost")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building outpost:", err)
		return 1
	}
	return m.Run()
}
