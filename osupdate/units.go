package osupdate

import (
	"context"
	"fmt"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// unitStates is what moving from prev to want does to units' install
// state: want's enabled, disabled, masked and unmasked as it says; prev's
// units that want no longer names are disabled and unmasked.
type unitStates struct {
	enable, disable, mask, unmask []string
}

func unitChanges(prev, want *api.MachineConfig) unitStates {
	var s unitStates
	units := func(mc *api.MachineConfig) []api.IgnitionUnit {
		if mc == nil {
			return nil
		}
		return mc.Spec.Config.Systemd.Units
	}
	was := map[string]api.IgnitionUnit{}
	for _, u := range units(prev) {
		was[u.Name] = u
	}
	now := map[string]bool{}
	for _, u := range units(want) {
		now[u.Name] = true
		masked := u.Mask != nil && *u.Mask
		old, hadOld := was[u.Name]
		wasMasked := hadOld && old.Mask != nil && *old.Mask
		switch {
		case masked:
			s.mask = append(s.mask, u.Name)
		case wasMasked:
			s.unmask = append(s.unmask, u.Name)
		}
		switch {
		case masked:
		case u.Enabled != nil && *u.Enabled:
			s.enable = append(s.enable, u.Name)
		case u.Enabled != nil:
			s.disable = append(s.disable, u.Name)
		case hadOld && old.Enabled != nil && *old.Enabled:
			s.disable = append(s.disable, u.Name)
		}
	}
	for _, u := range units(prev) {
		if now[u.Name] {
			continue
		}
		if u.Mask != nil && *u.Mask {
			s.unmask = append(s.unmask, u.Name)
		}
		if u.Enabled != nil && *u.Enabled {
			s.disable = append(s.disable, u.Name)
		}
	}
	return s
}

// apply reloads systemd's units and sets their states. Each call is
// idempotent: applying it again after a crash does the same.
func (u unitStates) apply(ctx context.Context, sd Systemd) error {
	if err := sd.DaemonReload(ctx); err != nil {
		return fmt.Errorf("daemon-reload: %w", err)
	}
	for _, step := range []struct {
		what  string
		units []string
		do    func(context.Context, []string) error
	}{{"unmask", u.unmask, sd.UnmaskUnits}, {"disable", u.disable, sd.DisableUnits}, {"mask", u.mask, sd.MaskUnits}, {"enable", u.enable, sd.EnableUnits}} {
		if len(step.units) == 0 {
			continue
		}
		if err := step.do(ctx, step.units); err != nil {
			return fmt.Errorf("%s %v: %w", step.what, step.units, err)
		}
	}
	return nil
}

// enabledUnits are the units want enables, which the health gate wants
// active after the boot.
func enabledUnits(want *api.MachineConfig) []string {
	var out []string
	for _, u := range want.Spec.Config.Systemd.Units {
		if u.Enabled != nil && *u.Enabled && (u.Mask == nil || !*u.Mask) {
			out = append(out, u.Name)
		}
	}
	return out
}
