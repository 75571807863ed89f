package api

import (
	"path"
	"slices"
	"strings"
)

// MachineConfiguration is the cluster's one machine-config setting object
// (operator.openshift.io/v1, named "cluster"), as in OpenShift. Outpost
// reads its node disruption policy: which changes to a pool's config a
// host takes up without a reboot, or without a drain. Everything else in
// OpenShift's object is the operator's and not served here.
type MachineConfiguration struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Spec       MachineConfigurationSpec `json:"spec"`
}

// MachineConfigurationName is the only name a MachineConfiguration may
// have, as in OpenShift.
const MachineConfigurationName = "cluster"

// MachineConfigurationSpec is the setting. managementState and the log
// levels are taken so that OpenShift's object applies as it is; outpost
// has no operator for them to steer.
type MachineConfigurationSpec struct {
	ManagementState      string                     `json:"managementState,omitempty"`
	LogLevel             string                     `json:"logLevel,omitempty"`
	OperatorLogLevel     string                     `json:"operatorLogLevel,omitempty"`
	NodeDisruptionPolicy NodeDisruptionPolicyConfig `json:"nodeDisruptionPolicy,omitzero"`
}

// NodeDisruptionPolicyConfig says what a host does when a pool's config
// changes a file, a unit or the SSH keys. A change no policy names needs
// a drain and a reboot; a change of the OS image or the kernel arguments
// always does.
type NodeDisruptionPolicyConfig struct {
	Files  []NodeDisruptionPolicyFile `json:"files,omitempty"`
	Units  []NodeDisruptionPolicyUnit `json:"units,omitempty"`
	SSHKey NodeDisruptionPolicySSHKey `json:"sshkey,omitzero"`
}

// NodeDisruptionPolicyFile is the policy for one file, by its exact path.
type NodeDisruptionPolicyFile struct {
	Path    string                 `json:"path"`
	Actions []NodeDisruptionAction `json:"actions"`
}

// NodeDisruptionPolicyUnit is the policy for one unit (its contents,
// drop-ins, enabled or masked state).
type NodeDisruptionPolicyUnit struct {
	Name    string                 `json:"name"`
	Actions []NodeDisruptionAction `json:"actions"`
}

// NodeDisruptionPolicySSHKey is OpenShift's policy for SSH key changes;
// outpost's configs carry no keys, so it is checked and has no effect.
type NodeDisruptionPolicySSHKey struct {
	Actions []NodeDisruptionAction `json:"actions,omitempty"`
}

// NodeDisruptionAction is one thing a host does for a change.
type NodeDisruptionAction struct {
	Type    string                 `json:"type"`
	Reload  *NodeDisruptionService `json:"reload,omitempty"`
	Restart *NodeDisruptionService `json:"restart,omitempty"`
}

// NodeDisruptionService names the unit a Reload or Restart acts on.
type NodeDisruptionService struct {
	ServiceName string `json:"serviceName"`
}

// The action types, as OpenShift names them. Reboot and None stand alone;
// the others are carried out in order after the files and units are
// written: Drain before the write, DaemonReload, Reload and Restart after
// it.
const (
	DisruptionReboot       = "Reboot"
	DisruptionNone         = "None"
	DisruptionDrain        = "Drain"
	DisruptionReload       = "Reload"
	DisruptionRestart      = "Restart"
	DisruptionDaemonReload = "DaemonReload"
	// DisruptionSpecial is OpenShift's action for its own files
	// (registries.conf); it is not for users and outpost has none.
	DisruptionSpecial = "Special"
)

var disruptionTypes = []string{DisruptionReboot, DisruptionNone, DisruptionDrain, DisruptionReload, DisruptionRestart, DisruptionDaemonReload}

var managementStates = []string{"Managed", "Unmanaged", "Removed", "Force"}

var logLevels = []string{"Normal", "Debug", "Trace", "TraceAll"}

func validateMachineConfiguration(mc *MachineConfiguration) ErrorList {
	var errs ErrorList
	if mc.Name != "" && mc.Name != MachineConfigurationName {
		errs = append(errs, Invalid(Root("metadata").Child("name"), mc.Name, `must be "cluster": the cluster has one MachineConfiguration`))
	}
	sp := Root("spec")
	if s := mc.Spec.ManagementState; s != "" && !slices.Contains(managementStates, s) {
		errs = append(errs, NotSupported(sp.Child("managementState"), s, managementStates))
	}
	for _, f := range []struct{ name, v string }{{"logLevel", mc.Spec.LogLevel}, {"operatorLogLevel", mc.Spec.OperatorLogLevel}} {
		if f.v != "" && !slices.Contains(logLevels, f.v) {
			errs = append(errs, NotSupported(sp.Child(f.name), f.v, logLevels))
		}
	}
	pp := sp.Child("nodeDisruptionPolicy")
	p := mc.Spec.NodeDisruptionPolicy
	paths := map[string]bool{}
	for i, f := range p.Files {
		fp := pp.Child("files").Index(i)
		switch {
		case f.Path == "":
			errs = append(errs, Required(fp.Child("path"), "an absolute path"))
		case !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/":
			errs = append(errs, Invalid(fp.Child("path"), f.Path, "must be a clean absolute path to a file"))
		case paths[f.Path]:
			errs = append(errs, Duplicate(fp.Child("path"), f.Path))
		}
		paths[f.Path] = true
		errs = append(errs, validateDisruptionActions(fp.Child("actions"), f.Actions)...)
	}
	units := map[string]bool{}
	for i, u := range p.Units {
		up := pp.Child("units").Index(i)
		if msg := unitNameProblem(u.Name); msg != "" {
			errs = append(errs, Invalid(up.Child("name"), u.Name, msg))
		} else if units[u.Name] {
			errs = append(errs, Duplicate(up.Child("name"), u.Name))
		}
		units[u.Name] = true
		errs = append(errs, validateDisruptionActions(up.Child("actions"), u.Actions)...)
	}
	if len(p.SSHKey.Actions) > 0 {
		errs = append(errs, validateDisruptionActions(pp.Child("sshkey", "actions"), p.SSHKey.Actions)...)
	}
	return errs
}

func validateDisruptionActions(p *Path, actions []NodeDisruptionAction) ErrorList {
	var errs ErrorList
	if len(actions) == 0 {
		return ErrorList{Required(p, "at least one action: "+strings.Join(disruptionTypes, ", "))}
	}
	for i, a := range actions {
		ap := p.Index(i)
		switch {
		case a.Type == "":
			errs = append(errs, Required(ap.Child("type"), "one of "+strings.Join(disruptionTypes, ", ")))
		case a.Type == DisruptionSpecial:
			errs = append(errs, Invalid(ap.Child("type"), a.Type, "Special is reserved for the cluster's own defaults"))
		case !slices.Contains(disruptionTypes, a.Type):
			errs = append(errs, NotSupported(ap.Child("type"), a.Type, disruptionTypes))
		case (a.Type == DisruptionReboot || a.Type == DisruptionNone) && len(actions) > 1:
			errs = append(errs, Invalid(ap.Child("type"), a.Type, a.Type+" must be the only action"))
		}
		for _, s := range []struct {
			field, typ string
			v          *NodeDisruptionService
		}{{"reload", DisruptionReload, a.Reload}, {"restart", DisruptionRestart, a.Restart}} {
			switch {
			case a.Type == s.typ && s.v == nil:
				errs = append(errs, Required(ap.Child(s.field, "serviceName"), "the unit to "+s.field))
			case a.Type != s.typ && s.v != nil:
				errs = append(errs, Forbidden(ap.Child(s.field), "only with type "+s.typ))
			case s.v != nil:
				if msg := unitNameProblem(s.v.ServiceName); msg != "" {
					errs = append(errs, Invalid(ap.Child(s.field, "serviceName"), s.v.ServiceName, msg))
				}
			}
		}
	}
	return errs
}
