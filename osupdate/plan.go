package osupdate

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Plan is what an update does on this host, decided before it starts
// from what it changes here and the cluster's node disruption policy
// (OpenShift's MachineConfiguration "cluster"): drain or not, reboot or
// not, and without a reboot which units to reload or restart after the
// write. It is kept in the journal: a restarted agent carries on with
// the same plan.
type Plan struct {
	Reboot bool `json:"reboot,omitempty"`
	Drain  bool `json:"drain,omitempty"`
	// Actions are DaemonReload, Reload and Restart, in the order the
	// policies name them, each once; carried out after the write when
	// there is no reboot (and again after a rollback's restore).
	Actions []api.NodeDisruptionAction `json:"actions,omitempty"`
	// Why is the change that asks for the reboot or the drain, for the
	// log and the node's reason.
	Why string `json:"why,omitempty"`
}

// rebootPlan is an update's plan without a policy that spares anything:
// drain and reboot, as the MCO does by default.
func rebootPlan(why string) Plan { return Plan{Reboot: true, Drain: true, Why: why} }

// planFor is the plan for the changes: files that differ on the host
// (a unit's file or drop-in counts as the unit's), units whose enabled or
// masked state the config changes, and whether the OS (image, kernel
// arguments) changes, which always reboots.
func planFor(policy *api.MachineConfiguration, changedFiles []fileOp, changedUnits []string, osChanged bool) Plan {
	if osChanged {
		return rebootPlan("the OS image or kernel arguments change")
	}
	var np api.NodeDisruptionPolicyConfig
	if policy != nil {
		np = policy.Spec.NodeDisruptionPolicy
	}
	var p Plan
	add := func(what string, actions []api.NodeDisruptionAction, found bool) {
		if !found {
			if !p.Reboot {
				p = rebootPlan(what + " changes and no node disruption policy names it")
			}
			return
		}
		for _, a := range actions {
			switch a.Type {
			case api.DisruptionReboot:
				if !p.Reboot {
					p = rebootPlan(what + " changes and its policy reboots")
				}
			case api.DisruptionDrain:
				if !p.Drain {
					p.Drain, p.Why = true, what+" changes and its policy drains"
				}
			case api.DisruptionReload, api.DisruptionRestart, api.DisruptionDaemonReload:
				if !slices.ContainsFunc(p.Actions, func(b api.NodeDisruptionAction) bool { return reflect.DeepEqual(a, b) }) {
					p.Actions = append(p.Actions, a)
				}
			}
		}
	}
	units := slices.Clone(changedUnits)
	for _, op := range changedFiles {
		if op.unit != "" {
			if !slices.Contains(units, op.unit) {
				units = append(units, op.unit)
			}
			continue
		}
		i := slices.IndexFunc(np.Files, func(f api.NodeDisruptionPolicyFile) bool { return f.Path == op.path })
		var actions []api.NodeDisruptionAction
		if i >= 0 {
			actions = np.Files[i].Actions
		}
		add("file "+op.path, actions, i >= 0)
	}
	for _, name := range units {
		i := slices.IndexFunc(np.Units, func(u api.NodeDisruptionPolicyUnit) bool { return u.Name == name })
		var actions []api.NodeDisruptionAction
		if i >= 0 {
			actions = np.Units[i].Actions
		}
		add("unit "+name, actions, i >= 0)
	}
	if p.Reboot {
		p.Actions = nil // the boot takes everything up
	}
	return p
}

// unitsChanged are the units whose enabled or masked state, contents or
// drop-ins differ between prev and want, and prev's units want drops.
func unitsChanged(prev, want *api.MachineConfig) []string {
	was := map[string]api.IgnitionUnit{}
	if prev != nil {
		for _, u := range prev.Spec.Config.Systemd.Units {
			was[u.Name] = u
		}
	}
	var out []string
	for _, u := range want.Spec.Config.Systemd.Units {
		old, ok := was[u.Name]
		delete(was, u.Name)
		if ok && reflect.DeepEqual(old, u) {
			continue
		}
		if !ok && u.Enabled == nil && u.Mask == nil {
			continue // only files, which the file diff sees
		}
		out = append(out, u.Name)
	}
	for name, u := range was {
		if u.Enabled != nil || u.Mask != nil {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// takeUp carries out a plan's actions after a write without a reboot:
// systemd reads the units again, the config's enabled units that do not
// run are started (as the boot would), and the policy's reloads and
// restarts run in order.
func (u *Updater) takeUp(ctx context.Context, p Plan, want *api.MachineConfig) error {
	if err := u.cfg.Systemd.DaemonReload(ctx); err != nil {
		return fmt.Errorf("daemon-reload: %w", err)
	}
	for _, a := range p.Actions {
		switch a.Type {
		case api.DisruptionReload:
			if err := u.cfg.Systemd.ReloadUnit(ctx, a.Reload.ServiceName); err != nil {
				return fmt.Errorf("reload %s: %w", a.Reload.ServiceName, err)
			}
		case api.DisruptionRestart:
			if err := u.cfg.Systemd.RestartUnit(ctx, a.Restart.ServiceName); err != nil {
				return fmt.Errorf("restart %s: %w", a.Restart.ServiceName, err)
			}
		}
	}
	if want == nil {
		return nil
	}
	for _, name := range enabledUnits(want) {
		st, err := u.cfg.Systemd.ActiveState(ctx, name)
		if err != nil {
			return fmt.Errorf("unit %s: %w", name, err)
		}
		if st != "active" && st != "activating" && st != "reloading" {
			if err := u.cfg.Systemd.RestartUnit(ctx, name); err != nil {
				return fmt.Errorf("start %s: %w", name, err)
			}
		}
	}
	return nil
}
