package cgroupstest

import (
	"os"
	"path/filepath"
	"testing"
)

// Tree writes files (a path under cg/ or proc/ → its content) under a new
// directory and returns the two roots, for cgroups.FS{Root: root, Proc:
// proc}. It does not build the FS itself, so that package cgroups' own
// tests can use it too.
func Tree(t testing.TB, files map[string]string) (root, proc string) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "cg"), filepath.Join(dir, "proc")
}
