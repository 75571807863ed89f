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
	// Made tells a plan from none: an older agent's journal has none.
	Made   bool `json:"made"`
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
func rebootPlan(why string) Plan { return Plan{Made: true, Reboot: true, Drain: true, Why: why} }

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
	p := Plan{Made: true}
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

// unitsChanged are the units whose enabled or masked state differs
// between prev and want, and prev's units with a state that want drops;
// a unit's contents and drop-ins are files, which the file diff sees as
// the host has them.
func unitsChanged(prev, want *api.MachineConfig) []string {
	type state struct{ enabled, mask *bool }
	was := map[string]state{}
	if prev != nil {
		for _, u := range prev.Spec.Config.Systemd.Units {
			was[u.Name] = state{u.Enabled, u.Mask}
		}
	}
	same := func(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
	var out []string
	for _, u := range want.Spec.Config.Systemd.Units {
		old, ok := was[u.Name]
		delete(was, u.Name)
		if ok && same(old.enabled, u.Enabled) && same(old.mask, u.Mask) || !ok && u.Enabled == nil && u.Mask == nil {
			continue
		}
		out = append(out, u.Name)
	}
	for name, st := range was {
		if st.enabled != nil || st.mask != nil {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// takeUp carries out a plan's actions after a write without a reboot
// (from's config replaced by to's): the policy's daemon-reloads, reloads
// and restarts in order (the write itself reloaded systemd's units), then
// the units to newly enables are started, as the boot would have.
func (u *Updater) takeUp(ctx context.Context, p Plan, from, to *api.MachineConfig) error {
	for _, a := range p.Actions {
		var err error
		switch a.Type {
		case api.DisruptionDaemonReload:
			err = u.cfg.Systemd.DaemonReload(ctx)
		case api.DisruptionReload:
			err = u.cfg.Systemd.ReloadUnit(ctx, a.Reload.ServiceName)
		case api.DisruptionRestart:
			err = u.cfg.Systemd.RestartUnit(ctx, a.Restart.ServiceName)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", a.Type, err)
		}
	}
	for _, name := range newlyEnabled(from, to) {
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

// newlyEnabled are the units to enables that from did not.
func newlyEnabled(from, to *api.MachineConfig) []string {
	if to == nil {
		return nil
	}
	var was []string
	if from != nil {
		was = enabledUnits(from)
	}
	var out []string
	for _, name := range enabledUnits(to) {
		if !slices.Contains(was, name) {
			out = append(out, name)
		}
	}
	return out
}
