package logwriterbin

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

//go:embed bin
var files embed.FS

// embedded is the binary's path inside files.
const embedded = "bin/outpost-logwriter"

// Install writes the embedded log writer into dir and returns its path,
// or "" when this build embeds none. The file is named after its content,
// so an upgraded agent installs its writer beside the one that running
// containers' writers still execute, instead of over it.
func Install(dir string) (string, error) {
	data, err := files.ReadFile(embedded)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("embedded log writer: %w", err)
	}
	return install(dir, data)
}

func install(dir string, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	path := filepath.Join(dir, "outpost-logwriter-"+hex.EncodeToString(sum[:6]))
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("install log writer: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".outpost-logwriter-*")
	if err != nil {
		return "", fmt.Errorf("install log writer: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return "", fmt.Errorf("install log writer: %w", err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return "", fmt.Errorf("install log writer: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("install log writer: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("install log writer: %w", err)
	}
	return path, nil
}
