package lossyfs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func mountT(t *testing.T) *FS {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("OUTPOST_TEST_REAL") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	f, err := Mount(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Unmount() })
	return f
}

// What was synced survives a power cut; what was written after is lost,
// also a file's growth; directories and renames survive.
func TestCutLosesWhatWasNotSynced(t *testing.T) {
	f := mountT(t)
	dir := filepath.Join(f.Dir(), "a", "b")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "log")
	w, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	synced := bytes.Repeat([]byte("s"), 10000)
	if _, err := w.Write(synced); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(bytes.Repeat([]byte("u"), 9000)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt([]byte("X"), 5); err != nil { // an unsynced overwrite
		t.Fatal(err)
	}
	w.Close()
	if got, _ := os.ReadFile(path); len(got) != 19000 {
		t.Fatalf("before the cut the file holds %d bytes, want 19000", len(got))
	}
	other := filepath.Join(dir, "never-synced")
	if err := os.WriteFile(other, []byte("gone"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, other+".renamed"); err != nil {
		t.Fatal(err)
	}
	if f.Syncs() != 1 {
		t.Errorf("%d syncs counted, want 1", f.Syncs())
	}

	if lost := f.Cut(); lost == 0 {
		t.Fatal("the cut lost nothing")
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, synced) {
		t.Fatalf("after the cut the file holds %d bytes (%q...), want the %d synced ones", len(got), got[:min(len(got), 8)], len(synced))
	}
	if b, err := os.ReadFile(other + ".renamed"); err != nil || len(b) != 0 {
		t.Fatalf("a renamed, never synced file after the cut: %q, %v; want it there and empty", b, err)
	}
}
