// Package fsync holds the directory sync that crash-safe file updates
// need: after a file is created, renamed or removed, the directory's entry
// survives a power cut only once the directory itself is synced.
package fsync

import (
	"fmt"
	"os"
)

// Dir fsyncs directory dir, so that the entries just created, renamed or
// removed in it survive a power cut.
func Dir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
