package controllers

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// The exec provider runs the site's command with the machine's fields in
// its environment; its last line says how; a failure carries the
// command's output and ErrProviderCommand; a hung command times out.
func TestExecProvider(t *testing.T) {
	m := &api.Machine{ObjectMeta: api.ObjectMeta{Name: "edge-1", Labels: map[string]string{LabelMachineRole: "master", LabelMachineZone: "zone-a"}},
		Spec: api.MachineSpec{ProviderID: "outpost://edge-1"}}
	ctx := context.Background()
	how, err := ExecProvider{Command: `echo checking; echo "off $OUTPOST_MACHINE_NAME $OUTPOST_MACHINE_PROVIDER_ID $OUTPOST_NODE_NAME $OUTPOST_MACHINE_ROLE $OUTPOST_MACHINE_ZONE"`}.Release(ctx, m)
	if err != nil || how != "checking; off edge-1 outpost://edge-1 edge-1 master zone-a" {
		t.Fatalf("release: %q, %v", how, err)
	}
	_, err = ExecProvider{Command: "echo 'BMC unreachable' >&2; exit 3"}.Release(ctx, m)
	if !errors.Is(err, ErrProviderCommand) || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "BMC unreachable") {
		t.Fatalf("failing command: %v", err)
	}
	_, err = ExecProvider{Command: "sleep 10", Timeout: 100 * time.Millisecond}.Release(ctx, m)
	if err == nil || !strings.Contains(err.Error(), "timed out after 100ms") {
		t.Fatalf("hung command: %v", err)
	}
}
