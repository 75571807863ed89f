package agent

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"

	"github.com/outpost-edge/outpost/agent/host"
	"github.com/outpost-edge/outpost/agent/logwriterbin"
	"github.com/outpost-edge/outpost/runtime/containerd"
)

// defaultAddress is the host's InternalIP as host.Facts finds it (the
// default route's interface), or "" when it finds none.
func defaultAddress(ctx context.Context, dataDir string) string {
	f, err := host.Facts(ctx, host.FactsConfig{DataDir: dataDir})
	if err != nil {
		return ""
	}
	for _, a := range f.Addresses {
		if a.Type == "InternalIP" {
			return a.Address
		}
	}
	return ""
}

// startRuntime connects to containerd: the configured socket, or a
// private containerd the agent starts and supervises (as k3s does) when
// none is given and the binary is installed.
func (a *Agent) startRuntime(ctx context.Context) (Runtime, func(), error) {
	if a.cfg.Runtime != nil {
		return a.cfg.Runtime, func() {}, nil
	}
	socket := a.cfg.ContainerdSocket
	stop := func() {}
	if socket == "" {
		bin, err := exec.LookPath("containerd")
		if err != nil {
			return nil, nil, ErrNoRuntime
		}
		supCtx := ctx
		if a.cfg.StopPodsOnExit {
			// The pods are stopped after ctx ends: containerd must
			// outlive it, until stop.
			supCtx = context.WithoutCancel(ctx)
		}
		sup, err := containerd.StartSupervised(supCtx, containerd.SupervisorConfig{
			Binary: bin,
			Root:   filepath.Join(a.cfg.DataDir, "containerd"),
			Logger: a.log,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("start containerd: %w", err)
		}
		socket = sup.Socket()
		stop = func() { _ = sup.Stop() }
	}
	// The small embedded log writer when this build has one; else
	// outpost's own executable.
	writer, err := logwriterbin.Install(filepath.Join(a.cfg.DataDir, "bin"))
	if err != nil {
		a.log.Warn("using outpost itself as the containers' log writer", "err", err)
		writer = ""
	}
	rt, err := containerd.New(ctx, containerd.Config{
		LogWriter:  writer,
		Socket:     socket,
		LogDir:     filepath.Join(a.cfg.DataDir, "logs"),
		Logger:     a.log,
		OCIRuntime: a.cfg.OCIRuntime,
	})
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("containerd at %s: %w", socket, err)
	}
	return rt, func() {
		_ = rt.Close()
		stop()
	}, nil
}
