package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// upgradePoll is how often `adm upgrade --wait` reads the cluster version
// and the pools: both change in steps of seconds to minutes (a server
// restarting, a node rebooting), so reading is cheaper than watching two
// kinds. Tests shorten it.
var upgradePoll = 2 * time.Second

// errUpdateRefused is a desired release the control plane refused
// (ReleaseAccepted False): waiting would never end.
var errUpdateRefused = errors.New("the update was refused")

// upgradeState is where an update stands, as `adm upgrade --wait` shows it.
type upgradeState struct {
	line string
	// controlPlane: the control plane runs the desired release (UPD-7);
	// nodes: every pool runs its rendered config on all its nodes (UPD-8).
	controlPlane, nodes bool
	version             string
	updated, machines   int32
}

// followUpgrade shows the update's progress on p until the control plane
// runs the desired release and every machine config pool has updated all
// its nodes, then says so on out. A refused release ends it with an
// error; so does ctx.
func followUpgrade(ctx context.Context, cl *client.Client, p *Progress, out io.Writer) error {
	defer p.Done()
	announced := false
	for {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		obj, err := cl.Get(ctx, clusterVersionResource, "", api.ClusterVersionName, client.GetOptions{})
		if err != nil {
			return orCause(ctx, err)
		}
		pools, _, err := cl.List(ctx, poolResource, "", client.ListOptions{})
		if err != nil {
			return orCause(ctx, err)
		}
		st, err := readUpgrade(obj.(*api.ClusterVersion), pools)
		if err != nil {
			return err
		}
		p.Update("%s", st.line)
		if st.controlPlane && !announced {
			fmt.Fprintf(p.Above(out), "Cluster version is %s\n", st.version)
			announced = true
		}
		if st.controlPlane && st.nodes {
			p.Done()
			if st.machines > 0 {
				fmt.Fprintf(out, "Every node is updated (%d/%d)\n", st.updated, st.machines)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(upgradePoll):
		}
	}
}

// readUpgrade sums up the cluster version and the pools.
func readUpgrade(cv *api.ClusterVersion, pools []api.Object) (upgradeState, error) {
	var st upgradeState
	d := cv.Spec.DesiredUpdate
	want := ""
	if d != nil {
		want = d.Version
		if want == "" {
			want = d.Image
		}
		if ra := cvCond(cv, api.CVReleaseAccepted); ra.Status == api.ConditionFalse {
			return st, fmt.Errorf("%w: %s: %s", errUpdateRefused, ra.Reason, ra.Message)
		}
	}
	var h *api.UpdateHistory
	if len(cv.Status.History) > 0 {
		h = &cv.Status.History[0]
	}
	switch {
	case d == nil:
		// Nothing requested: the control plane is where it is.
		st.controlPlane = h == nil || h.State == api.UpdateCompleted
	case h != nil && h.State == api.UpdateCompleted:
		st.controlPlane = (d.Image != "" && h.Image == d.Image) || (d.Image == "" && h.Version == d.Version)
	}
	st.version = cv.Status.Desired.Version
	if h != nil {
		st.version = h.Version
	}
	var parts []string
	switch prog := cvCond(cv, api.CVProgressing); {
	case st.controlPlane:
		parts = append(parts, "control plane at "+orNone(st.version))
	case cvCond(cv, api.CVFailing).Status == api.ConditionTrue:
		f := cvCond(cv, api.CVFailing)
		parts = append(parts, fmt.Sprintf("control plane: %s: %s", f.Reason, f.Message))
	case prog.Message != "":
		parts = append(parts, "control plane: "+prog.Message)
	default:
		parts = append(parts, "control plane: the update to "+want+" is being checked")
	}

	st.nodes = true
	var degraded int32
	var paused []string
	for _, o := range pools {
		mp := o.(*api.MachineConfigPool)
		st.machines += mp.Status.MachineCount
		st.updated += mp.Status.UpdatedMachineCount
		degraded += mp.Status.DegradedMachineCount
		if mp.Spec.Paused {
			paused = append(paused, mp.Name)
		}
		if mp.Status.ObservedGeneration < mp.Generation || mp.Status.Configuration.Name != mp.Spec.Configuration.Name ||
			mp.Status.UpdatedMachineCount < mp.Status.MachineCount {
			st.nodes = false
		}
	}
	if len(pools) > 0 {
		n := fmt.Sprintf("nodes updated %d/%d", st.updated, st.machines)
		if degraded > 0 {
			n += fmt.Sprintf(", %d degraded", degraded)
		}
		if len(paused) > 0 {
			n += ", paused: " + strings.Join(paused, ", ")
		}
		parts = append(parts, n)
	}
	st.line = strings.Join(parts, "; ")
	return st, nil
}

// orCause is err, or why ctx ended when it did: a request cut short by
// --timeout says that the time ran out.
func orCause(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}
