package api

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"
)

// MachineConfig (machineconfiguration.openshift.io/v1) is configuration
// for the hosts of a pool (SPEC UPD-8): files, systemd units, kernel
// arguments and the OS image, in the shape the Machine Config Operator
// uses, so existing ones apply as they are. spec.config is Ignition v3,
// the part of it that matters on a running host. A pool merges its
// configs into one rendered config that its agents apply.
type MachineConfig struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Spec       MachineConfigSpec `json:"spec,omitzero"`
}

// MachineConfigSpec is the MCO's, with one addition (HealthCheck).
type MachineConfigSpec struct {
	Config          IgnitionConfig `json:"config,omitzero"`
	KernelArguments []string       `json:"kernelArguments,omitempty"`
	// OSImageURL is the OS image the hosts boot, as the OS backend names it
	// (a container image for bootc and rpm-ostree, a version for the
	// directory backend); empty keeps the one they run.
	OSImageURL string `json:"osImageURL,omitempty"`
	// FIPS, KernelType and Extensions are the MCO's; outpost does not
	// switch kernels or layer packages, so only their neutral values are
	// accepted (false, "" or "default", none).
	FIPS       bool     `json:"fips,omitempty"`
	KernelType string   `json:"kernelType,omitempty"`
	Extensions []string `json:"extensions,omitempty"`
	// HealthCheck is outpost's: a command the agent runs after the boot
	// that applied the config; if it fails, the host rolls back.
	HealthCheck *ConfigHealthCheck `json:"healthCheck,omitempty"`
}

// ConfigHealthCheck is a command run on the host after an update's boot;
// exit status 0 within Timeout (a duration, default 60s) passes.
type ConfigHealthCheck struct {
	Command []string `json:"command"`
	Timeout string   `json:"timeout,omitempty"`
}

// DefaultConfigHealthCheckTimeout bounds a health check without one.
const DefaultConfigHealthCheckTimeout = time.Minute

// TimeoutDuration is the check's timeout (the default when unset or bad,
// which validation refuses).
func (h *ConfigHealthCheck) TimeoutDuration() time.Duration {
	if d, err := time.ParseDuration(h.Timeout); err == nil && d > 0 {
		return d
	}
	return DefaultConfigHealthCheckTimeout
}

// IgnitionConfig is an Ignition v3 config: storage.files and
// systemd.units. Other sections (disks, filesystems, passwd, links) are
// refused by the strict decoder with their field path: they belong to a
// first boot, not to a running host.
type IgnitionConfig struct {
	Ignition IgnitionMeta    `json:"ignition,omitzero"`
	Storage  IgnitionStorage `json:"storage,omitzero"`
	Systemd  IgnitionSystemd `json:"systemd,omitzero"`
}

// IgnitionMeta holds the config's version ("3.2.0").
type IgnitionMeta struct {
	Version string `json:"version,omitempty"`
}

// IgnitionStorage is the files part.
type IgnitionStorage struct {
	Files []IgnitionFile `json:"files,omitempty"`
}

// IgnitionFile is a file written on the host.
type IgnitionFile struct {
	Path string `json:"path"`
	// Mode is the file's permission bits, written in JSON as a decimal
	// number as Ignition does (420 is 0644); default 0644.
	Mode *int `json:"mode,omitempty"`
	// Overwrite false keeps a file that is already there; default true
	// here, as the MCO writes its files.
	Overwrite *bool             `json:"overwrite,omitempty"`
	Contents  IgnitionContents  `json:"contents,omitzero"`
	User      *IgnitionNodeUser `json:"user,omitempty"`
	Group     *IgnitionNodeUser `json:"group,omitempty"`
}

// IgnitionContents is where a file's bytes come from: a data URL only
// (hosts at the edge fetch nothing from elsewhere), optionally gzipped.
type IgnitionContents struct {
	Source      string `json:"source,omitempty"`
	Compression string `json:"compression,omitempty"`
}

// IgnitionNodeUser names a file's owner or group by ID or name.
type IgnitionNodeUser struct {
	ID   *int   `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
}

// IgnitionSystemd is the units part.
type IgnitionSystemd struct {
	Units []IgnitionUnit `json:"units,omitempty"`
}

// IgnitionUnit is a systemd unit: its file (Contents, optional for a unit
// the host already has), drop-ins, and whether it is enabled or masked.
type IgnitionUnit struct {
	Name     string           `json:"name"`
	Enabled  *bool            `json:"enabled,omitempty"`
	Mask     *bool            `json:"mask,omitempty"`
	Contents string           `json:"contents,omitempty"`
	Dropins  []IgnitionDropin `json:"dropins,omitempty"`
}

// IgnitionDropin is a unit's drop-in (NAME.d/DROPIN.conf).
type IgnitionDropin struct {
	Name     string `json:"name"`
	Contents string `json:"contents,omitempty"`
}

// MachineConfigPool (machineconfiguration.openshift.io/v1) is a group of
// nodes that take the same configuration, updated at most maxUnavailable
// at a time (SPEC UPD-8, UPD-9).
type MachineConfigPool struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Spec       MachineConfigPoolSpec   `json:"spec,omitzero"`
	Status     MachineConfigPoolStatus `json:"status,omitzero"`
}

// MachineConfigPoolSpec is the MCO's.
type MachineConfigPoolSpec struct {
	// MachineConfigSelector picks the configs merged for the pool.
	MachineConfigSelector *LabelSelector `json:"machineConfigSelector,omitempty"`
	// NodeSelector picks the pool's nodes.
	NodeSelector *LabelSelector `json:"nodeSelector,omitempty"`
	// MaxUnavailable is how many nodes (or what percentage, rounded down,
	// at least 1) may be unavailable at once during an update; default 1.
	MaxUnavailable *IntOrString `json:"maxUnavailable,omitempty"`
	// Paused stops the pool from starting an update on more nodes.
	Paused bool `json:"paused,omitempty"`
	// Configuration is the rendered config the pool's nodes should run;
	// the controller sets it.
	Configuration MachineConfigPoolConfiguration `json:"configuration,omitzero"`
}

// MachineConfigPoolConfiguration names a rendered config and the configs
// it was rendered from.
type MachineConfigPoolConfiguration struct {
	Name   string            `json:"name,omitempty"`
	Source []ObjectReference `json:"source,omitempty"`
}

// MachineConfigPoolStatus counts the pool's nodes (UPD-9's columns).
type MachineConfigPoolStatus struct {
	ObservedGeneration      int64                          `json:"observedGeneration,omitempty"`
	Configuration           MachineConfigPoolConfiguration `json:"configuration,omitzero"`
	MachineCount            int32                          `json:"machineCount"`
	UpdatedMachineCount     int32                          `json:"updatedMachineCount"`
	ReadyMachineCount       int32                          `json:"readyMachineCount"`
	UnavailableMachineCount int32                          `json:"unavailableMachineCount"`
	DegradedMachineCount    int32                          `json:"degradedMachineCount"`
	Conditions              []MachineConfigPoolCondition   `json:"conditions,omitempty"`
}

// MachineConfigPoolCondition is one of the pool's conditions.
type MachineConfigPoolCondition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	LastTransitionTime *Time  `json:"lastTransitionTime,omitempty"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
}

// Pool conditions, as the MCO names them.
const (
	PoolUpdated        = "Updated"
	PoolUpdating       = "Updating"
	PoolDegraded       = "Degraded"
	PoolNodeDegraded   = "NodeDegraded"
	PoolRenderDegraded = "RenderDegraded"
)

// The per-node contract between the pool controller and the node's agent,
// the MCO's node annotations: the controller sets desiredConfig; the agent
// applies it, then sets currentConfig, and keeps state and reason.
const (
	AnnotationCurrentConfig = "machineconfiguration.openshift.io/currentConfig"
	AnnotationDesiredConfig = "machineconfiguration.openshift.io/desiredConfig"
	AnnotationMCState       = "machineconfiguration.openshift.io/state"
	AnnotationMCReason      = "machineconfiguration.openshift.io/reason"
	// AnnotationUpdateCordoned is outpost's: the agent cordoned its node
	// for an update, so it may uncordon it (a node may not otherwise
	// change spec.unschedulable: an administrator's cordon stays).
	AnnotationUpdateCordoned = "outpost.io/update-cordoned"
	// AnnotationConfigUpdates "off" on a Node says its agent takes no
	// config updates (it runs without systemd, or with --os-updates
	// off): its pool leaves it out and names it.
	AnnotationConfigUpdates = "outpost.io/config-updates"
	// LabelMachineConfigRole is the label the MCO's pools select their
	// configs by (machineconfiguration.openshift.io/role=worker).
	LabelMachineConfigRole = "machineconfiguration.openshift.io/role"
)

// AnnotationFleetLockHolders is on a MachineConfigPool: the FleetLock
// clients (hosts that update themselves, as Zincati does) holding a
// reboot lock of the pool, a JSON list of FleetLockHolder. They count
// toward the pool's maxUnavailable with its own updating nodes.
const AnnotationFleetLockHolders = "outpost.io/fleetlock-holders"

// FleetLockHolder is one holder of a pool's reboot lock.
type FleetLockHolder struct {
	ID    string `json:"id"`
	Since Time   `json:"since"`
}

// FleetLockHolders reads a pool's holders (none when the annotation is
// absent or unreadable).
func FleetLockHolders(p *MachineConfigPool) []FleetLockHolder {
	var out []FleetLockHolder
	if v := p.Annotations[AnnotationFleetLockHolders]; v != "" {
		_ = json.Unmarshal([]byte(v), &out)
	}
	return out
}

// Node update states (AnnotationMCState).
const (
	MCStateDone      = "Done"
	MCStateWorking   = "Working"
	MCStateRebooting = "Rebooting"
	MCStateDegraded  = "Degraded"
)

// RenderedPrefix starts the name of every rendered config:
// rendered-POOL-HASH.
const RenderedPrefix = "rendered-"

// maxFileBytes bounds a file's decoded (and decompressed) contents: the
// config is stored in raft and sent to every host of the pool.
const maxFileBytes = 1 << 20

// ignitionVersions are the Ignition spec versions whose shape this is.
var ignitionVersions = []string{"3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0"}

// unitSuffixes are the unit types a config may name.
var unitSuffixes = []string{".service", ".socket", ".timer", ".target", ".path", ".mount", ".automount", ".swap", ".slice"}

// ErrDataURL is a file source that is not a data URL outpost can decode.
var ErrDataURL = errors.New("not a data URL")

// DecodeFileContents returns a file's bytes from its data URL (RFC 2397:
// "data:[MEDIATYPE][;base64],DATA", DATA percent-encoded unless base64),
// gunzipped when compression is gzip. An empty source is an empty file.
func DecodeFileContents(c IgnitionContents) ([]byte, error) {
	if c.Source == "" {
		return nil, nil
	}
	rest, ok := strings.CutPrefix(c.Source, "data:")
	if !ok {
		return nil, fmt.Errorf("%w: only data: URLs are supported (a host fetches nothing from elsewhere)", ErrDataURL)
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, fmt.Errorf("%w: no comma after the media type", ErrDataURL)
	}
	var b []byte
	if strings.HasSuffix(meta, ";base64") {
		// Base64 in a URL may itself be percent-encoded.
		un, err := url.PathUnescape(data)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrDataURL, err)
		}
		if b, err = base64.StdEncoding.DecodeString(un); err != nil {
			if b, err = base64.RawStdEncoding.DecodeString(un); err != nil {
				return nil, fmt.Errorf("%w: base64: %w", ErrDataURL, err)
			}
		}
	} else {
		un, err := url.PathUnescape(data)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrDataURL, err)
		}
		b = []byte(un)
	}
	switch c.Compression {
	case "":
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		out, err := io.ReadAll(io.LimitReader(zr, maxFileBytes+1))
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		b = out
	default:
		return nil, fmt.Errorf("compression %q: want gzip or none", c.Compression)
	}
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("more than %d bytes", maxFileBytes)
	}
	return b, nil
}

// ConfigPriority is a config name's part before its first "-" ("50" of
// "50-worker-chrony"): configs merge in name order, so two of one
// priority that write one file differently would be ordered by accident.
func ConfigPriority(name string) string {
	p, _, _ := strings.Cut(name, "-")
	return p
}

// SameFile reports whether two file entries write the same thing.
func SameFile(a, b IgnitionFile) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// ConfigConflicts lists the files mc writes differently from other, a
// config of the same priority for the same role: each as the index of
// mc's file. Configs of different roles (99-master-chrony and
// 99-worker-chrony) go to different pools and do not meet.
func ConfigConflicts(mc, other *MachineConfig) []int {
	if mc.Name == other.Name || ConfigPriority(mc.Name) != ConfigPriority(other.Name) {
		return nil
	}
	if a, b := mc.Labels[LabelMachineConfigRole], other.Labels[LabelMachineConfigRole]; a != "" && b != "" && a != b {
		return nil
	}
	var out []int
	for i, f := range mc.Spec.Config.Storage.Files {
		for _, g := range other.Spec.Config.Storage.Files {
			if f.Path == g.Path && !SameFile(f, g) {
				out = append(out, i)
				break
			}
		}
	}
	return out
}

// FileMode is the file's permission bits (default 0644).
func (f *IgnitionFile) FileMode() int {
	if f.Mode == nil {
		return 0o644
	}
	return *f.Mode
}

// Overwrites reports whether an existing file is replaced (default yes).
func (f *IgnitionFile) Overwrites() bool { return f.Overwrite == nil || *f.Overwrite }

func validateMachineConfig(mc *MachineConfig) ErrorList {
	var errs ErrorList
	sp := Root("spec")
	cp := sp.Child("config")
	if v := mc.Spec.Config.Ignition.Version; v == "" {
		errs = append(errs, Required(cp.Child("ignition", "version"), "an Ignition v3 version, such as 3.2.0"))
	} else if !slices.Contains(ignitionVersions, v) {
		errs = append(errs, NotSupported(cp.Child("ignition", "version"), v, ignitionVersions))
	}
	paths := map[string]bool{}
	for i, f := range mc.Spec.Config.Storage.Files {
		fp := cp.Child("storage", "files").Index(i)
		switch {
		case f.Path == "":
			errs = append(errs, Required(fp.Child("path"), "an absolute path"))
		case !path.IsAbs(f.Path):
			errs = append(errs, Invalid(fp.Child("path"), f.Path, "must be an absolute path"))
		case path.Clean(f.Path) != f.Path || f.Path == "/":
			errs = append(errs, Invalid(fp.Child("path"), f.Path, "must be a clean path to a file (no .., no trailing /)"))
		case paths[f.Path]:
			errs = append(errs, Duplicate(fp.Child("path"), f.Path))
		}
		paths[f.Path] = true
		if f.Mode != nil && (*f.Mode < 0 || *f.Mode > 0o7777) {
			errs = append(errs, Invalid(fp.Child("mode"), *f.Mode, "must be permission bits between 0 and 07777 (4095), written in decimal as Ignition does: 420 is 0644"))
		}
		if _, err := DecodeFileContents(f.Contents); err != nil {
			field, value := "source", truncateValue(f.Contents.Source)
			if c := f.Contents.Compression; c != "" && c != "gzip" {
				field, value = "compression", c
			}
			errs = append(errs, Invalid(fp.Child("contents", field), value, err.Error()))
		}
		for _, u := range []struct {
			name string
			v    *IgnitionNodeUser
		}{{"user", f.User}, {"group", f.Group}} {
			if u.v != nil && u.v.ID != nil && *u.v.ID < 0 {
				errs = append(errs, Invalid(fp.Child(u.name, "id"), *u.v.ID, "must be 0 or more"))
			}
		}
	}
	units := map[string]bool{}
	for i, u := range mc.Spec.Config.Systemd.Units {
		up := cp.Child("systemd", "units").Index(i)
		if msg := unitNameProblem(u.Name); msg != "" {
			errs = append(errs, Invalid(up.Child("name"), u.Name, msg))
		} else if units[u.Name] {
			errs = append(errs, Duplicate(up.Child("name"), u.Name))
		}
		units[u.Name] = true
		if u.Mask != nil && *u.Mask && u.Enabled != nil && *u.Enabled {
			errs = append(errs, Invalid(up.Child("enabled"), true, "a masked unit cannot be enabled"))
		}
		if u.Mask != nil && *u.Mask && (u.Contents != "" || len(u.Dropins) > 0) {
			errs = append(errs, Invalid(up.Child("mask"), true, "a masked unit has no contents or drop-ins: masking links it to /dev/null, which systemd refuses over a unit file in /etc/systemd/system"))
		}
		dropins := map[string]bool{}
		for j, d := range u.Dropins {
			dp := up.Child("dropins").Index(j)
			switch {
			case d.Name == "":
				errs = append(errs, Required(dp.Child("name"), "a file name ending in .conf"))
			case !strings.HasSuffix(d.Name, ".conf") || strings.Contains(d.Name, "/"):
				errs = append(errs, Invalid(dp.Child("name"), d.Name, "must be a file name ending in .conf"))
			case dropins[d.Name]:
				errs = append(errs, Duplicate(dp.Child("name"), d.Name))
			}
			dropins[d.Name] = true
		}
	}
	for i, a := range mc.Spec.KernelArguments {
		if strings.TrimSpace(a) == "" || strings.ContainsAny(a, "\n\r") {
			errs = append(errs, Invalid(sp.Child("kernelArguments").Index(i), a, "must be a non-empty argument on one line"))
		}
	}
	if mc.Spec.FIPS {
		errs = append(errs, Invalid(sp.Child("fips"), true, "outpost does not switch a host to FIPS mode; set it when the host is installed"))
	}
	if k := mc.Spec.KernelType; k != "" && k != "default" {
		errs = append(errs, NotSupported(sp.Child("kernelType"), k, []string{"default"}))
	}
	if len(mc.Spec.Extensions) > 0 {
		errs = append(errs, Invalid(sp.Child("extensions"), mc.Spec.Extensions, "outpost does not layer packages onto the OS; put them in the OS image (osImageURL)"))
	}
	if h := mc.Spec.HealthCheck; h != nil {
		hp := sp.Child("healthCheck")
		if len(h.Command) == 0 || h.Command[0] == "" {
			errs = append(errs, Required(hp.Child("command"), "the program to run and its arguments"))
		}
		if h.Timeout != "" {
			if d, err := time.ParseDuration(h.Timeout); err != nil || d <= 0 {
				errs = append(errs, Invalid(hp.Child("timeout"), h.Timeout, "must be a duration above 0, such as 60s"))
			}
		}
	}
	return errs
}

// unitNameProblem says what is wrong with a unit's name, or "".
func unitNameProblem(name string) string {
	switch {
	case name == "":
		return "a unit name, such as example.service"
	case strings.ContainsAny(name, "/\\ \t\n"):
		return "must be a unit file name, without slashes or spaces"
	case !slices.ContainsFunc(unitSuffixes, func(s string) bool { return strings.HasSuffix(name, s) && len(name) > len(s) }):
		return "must end in a unit type: " + strings.Join(unitSuffixes, ", ")
	}
	return ""
}

// truncateValue keeps an error about a long data URL readable.
func truncateValue(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}

func validateMachineConfigPool(p *MachineConfigPool) ErrorList {
	var errs ErrorList
	sp := Root("spec")
	if s := p.Spec.MachineConfigSelector; s != nil {
		errs = append(errs, ValidateLabelSelector(s, sp.Child("machineConfigSelector"))...)
	}
	if s := p.Spec.NodeSelector; s != nil {
		errs = append(errs, ValidateLabelSelector(s, sp.Child("nodeSelector"))...)
	}
	if v := p.Spec.MaxUnavailable; v != nil {
		n, e := validateIntOrPercent(v, sp.Child("maxUnavailable"))
		switch {
		case len(e) > 0:
			errs = append(errs, e...)
		case n < 1 && !v.IsString:
			errs = append(errs, Invalid(sp.Child("maxUnavailable"), v.String(), "must be at least 1: with 0 no node could ever update"))
		case v.IsString && (n < 1 || n > 100):
			errs = append(errs, Invalid(sp.Child("maxUnavailable"), v.String(), "must be a percentage between 1% and 100%"))
		}
	}
	return errs
}

// WorkerPool is the MCO's default pool: a node that a custom pool also
// selects belongs to the custom pool.
const WorkerPool = "worker"

// PoolOf names the pool node n belongs to among pools: the only one whose
// nodeSelector matches it, or the custom one of a custom pool and worker;
// "" when none matches or it is ambiguous (no pool then updates it).
func PoolOf(n *Node, pools []*MachineConfigPool) string {
	var matching []string
	for _, p := range pools {
		if p.Spec.NodeSelector == nil {
			continue
		}
		if sel, err := SelectorFromLabelSelector(p.Spec.NodeSelector); err == nil && sel.Matches(n.Labels) {
			matching = append(matching, p.Name)
		}
	}
	slices.Sort(matching)
	switch {
	case len(matching) == 1:
		return matching[0]
	case len(matching) == 2 && slices.Contains(matching, WorkerPool):
		if matching[0] == WorkerPool {
			return matching[1]
		}
		return matching[0]
	}
	return ""
}

// MaxUnavailableOf is how many of total nodes may be unavailable at once:
// spec.maxUnavailable scaled down, at least 1 (default 1).
func (s *MachineConfigPoolSpec) MaxUnavailableOf(total int32) int32 {
	if s.MaxUnavailable == nil {
		return 1
	}
	return max(ScaledValue(s.MaxUnavailable, total, false), 1)
}
