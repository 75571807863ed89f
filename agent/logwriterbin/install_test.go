package logwriterbin

import (
	"bytes"
	"os"
	"testing"
)

// The writer is installed once per content, executable, and a changed
// file at its path is replaced.
func TestInstall(t *testing.T) {
	dir := t.TempDir()
	data := []byte("#!/bin/sh\necho writer\n")
	p1, err := install(dir, data)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p1)
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("installed %v %v", st, err)
	}
	p2, err := install(dir, data)
	if err != nil || p2 != p1 {
		t.Fatalf("second install: %q %v, want %q", p2, err, p1)
	}
	if err := os.WriteFile(p1, []byte("damaged"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := install(dir, data); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p1); !bytes.Equal(got, data) {
		t.Errorf("a damaged writer was not replaced: %q", got)
	}
	other, err := install(dir, []byte("newer"))
	if err != nil || other == p1 {
		t.Fatalf("a new writer must get its own path: %q %v", other, err)
	}
	if _, err := os.Stat(p1); err != nil {
		t.Errorf("the old writer, which running containers use, was removed: %v", err)
	}
}

// Install answers "" or a path, never an error, in a build with or
// without the embedded writer.
func TestInstallEmbedded(t *testing.T) {
	p, err := Install(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, rerr := files.ReadFile(embedded); rerr == nil && p == "" {
		t.Error("a writer is embedded but Install returned no path")
	}
}
