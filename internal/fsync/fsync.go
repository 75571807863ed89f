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
