package install

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/outpost-edge/outpost/internal/portcheck"
	"github.com/outpost-edge/outpost/osupdate/systemd"
)

// Host is the real System.
type Host struct{}

// Root reports whether the effective user is root.
func (Host) Root() bool { return os.Geteuid() == 0 }

// PID1 reads process 1's command name.
func (Host) PID1() (string, error) {
	b, err := os.ReadFile("/proc/1/comm")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// PortFree listens on addr and closes at once; a taken one names the
// process holding it when /proc tells.
func (Host) PortFree(network, addr string) error {
	err := portcheck.Free(network, addr)
	if err != nil {
		if who := portcheck.Holder(network, addr); who != "" {
			return fmt.Errorf("%w, by %s", err, who)
		}
	}
	return err
}

// ConnectSystemd is the real Installer.Connect: systemd's manager on the
// system bus (package osupdate/systemd).
func ConnectSystemd(ctx context.Context) (Systemd, io.Closer, error) {
	s, err := systemd.New(ctx, systemd.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("connect to systemd: %w", err)
	}
	return s, s, nil
}
