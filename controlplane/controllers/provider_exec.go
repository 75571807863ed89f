package controllers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// ExecProvider releases a host by running a site's command (issue 11
// item 1): ipmitool or redfishtool to power it off, a script to re-image
// it. The command runs through /bin/sh -c with the machine's fields in
// its environment:
//
//	OUTPOST_MACHINE_NAME, OUTPOST_MACHINE_PROVIDER_ID, OUTPOST_NODE_NAME,
//	OUTPOST_MACHINE_ROLE, OUTPOST_MACHINE_ZONE
//
// Exit status 0 is released (the last line of its output says how); any
// other is a failure that the controller shows as Released=False with the
// command's last lines, and retries with back-off.
type ExecProvider struct {
	// Command is the shell command.
	Command string
	// Timeout bounds one run; default 5 minutes.
	Timeout time.Duration
}

// ErrProviderCommand is a release command that failed.
var ErrProviderCommand = errors.New("release command failed")

// Release runs the command for m.
func (p ExecProvider) Release(ctx context.Context, m *api.Machine) (string, error) {
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", p.Command)
	cmd.Env = append(os.Environ(),
		"OUTPOST_MACHINE_NAME="+m.Name,
		"OUTPOST_MACHINE_PROVIDER_ID="+m.Spec.ProviderID,
		"OUTPOST_NODE_NAME="+nodeNameOf(m),
		"OUTPOST_MACHINE_ROLE="+m.Labels[LabelMachineRole],
		"OUTPOST_MACHINE_ZONE="+m.Labels[LabelMachineZone],
	)
	// A timed-out command's whole process group goes, and its output
	// pipes are not waited on for long (a child may hold them open).
	killGroup(cmd)
	cmd.WaitDelay = time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	last := lastLines(out.String(), 3)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("timed out after %s", timeout)
		}
		return "", fmt.Errorf("%w: %s: %w: %s", ErrProviderCommand, p.Command, err, last)
	}
	if last == "" {
		last = "released by " + p.Command
	}
	return last, nil
}

// lastLines is the last n non-empty lines of s, joined by "; ", at most
// 512 bytes.
func lastLines(s string, n int) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			keep = append(keep, l)
		}
	}
	if len(keep) > n {
		keep = keep[len(keep)-n:]
	}
	out := strings.Join(keep, "; ")
	if len(out) > 512 {
		out = "..." + out[len(out)-509:]
	}
	return out
}
