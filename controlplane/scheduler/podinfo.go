package scheduler

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// PodInfo is a pod with what the scheduler derives from it once: its
// requests, host ports, devices, and its affinity terms with their
// selectors parsed. The cluster keeps one per placed pod; a cycle makes
// one for the pod it places.
//
// At 150,000 placed pods these are most of the leader's scheduler cache,
// so a PodInfo holds inline only what nearly every pod has (issue 16 item
// 3): what most pods lack (extended resources, host ports, devices,
// claims, affinity terms) is behind podExtra, which pods without any of
// it share. 112 bytes a pod, where it was 384 with all of it inline.
type PodInfo struct {
	pod  *api.Pod
	node *NodeInfo
	// The pod's requests but for extended resources (podExtra.scalar);
	// requests() puts them together.
	milliCPU, memory, ephemeral int64
	nonZeroCPU                  int64
	nonZeroMem                  int64
	// controller is the UID of the owner reference marked controller.
	controller string
	// nodeIdx and nsIdx are the pod's positions in its node's and its
	// namespace's lists; slots its positions in the other index lists it
	// is in, for O(1) removal.
	nodeIdx, nsIdx int32
	slots          []slot
	// *podExtra is never nil: pods with none of it point at noExtra,
	// which must never be written (see newPodInfo and addTerms).
	*podExtra
}

// podExtra is what few pods have. Reading its fields through a PodInfo
// reads noExtra's empty ones for most pods.
type podExtra struct {
	scalar  []ScalarResource // extended resources requested
	ports   []hostPort
	devices []deviceUse
	claims  []string
	// Affinity terms, compiled. Namespaces default to the pod's own.
	reqAffinity  []affinityTerm
	reqAnti      []affinityTerm
	prefAffinity []affinityTerm
	prefAnti     []affinityTerm
	// termGroups are the groups of placed pods sharing each of its terms;
	// a pod has some only if it has terms, so only with its own podExtra.
	termGroups []*termGroup
}

// noExtra is the podExtra of every pod that has nothing of it; shared,
// so never written.
var noExtra podExtra

// requests is what the pod asks of a node for PodFitsResources.
func (p *PodInfo) requests() Resources {
	return Resources{MilliCPU: p.milliCPU, Memory: p.memory, EphemeralStorage: p.ephemeral, Scalar: p.scalar}
}

// Pod returns the pod.
func (p *PodInfo) Pod() *api.Pod { return p.pod }

// hostPort is one host port a pod binds.
type hostPort struct {
	ip       string // "0.0.0.0" for every address
	protocol string
	port     int32
}

// protoPort is a host port on any address.
type protoPort struct {
	protocol string
	port     int32
}

// deviceUse is a block device a pod mounts from the host, for
// NoDiskConflict.
type deviceUse struct {
	path     string
	readOnly bool
}

// affinityTerm is a pod affinity term with its selector parsed.
type affinityTerm struct {
	sel        api.Selector
	namespaces []string
	key        string
	weight     int64
}

// matches reports whether the term selects pod p.
func (t *affinityTerm) matches(p *api.Pod) bool {
	ns := false
	for _, n := range t.namespaces {
		if n == p.Namespace {
			ns = true
			break
		}
	}
	return ns && t.sel.Matches(p.Labels)
}

// wildcardIP is the host IP of a port bound on every address.
const wildcardIP = "0.0.0.0"

// newPodInfo derives what the scheduler needs from a pod. An affinity
// term whose selector cannot be parsed is an error (validation refuses
// such pods, so one can only come from a store written by something
// else); the PodInfo is still returned, without the terms that failed, so
// that a placed pod's resources and ports keep counting.
func newPodInfo(pod *api.Pod) (*PodInfo, error) {
	pi := &PodInfo{pod: pod}
	var x podExtra
	spec := &pod.Spec
	var req Resources
	req, pi.nonZeroCPU, pi.nonZeroMem = podRequests(spec)
	pi.milliCPU, pi.memory, pi.ephemeral, x.scalar = req.MilliCPU, req.Memory, req.EphemeralStorage, req.Scalar
	for _, cs := range [][]api.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			for _, p := range cs[i].Ports {
				if p.HostPort <= 0 {
					continue
				}
				hp := hostPort{ip: p.HostIP, protocol: p.Protocol, port: p.HostPort}
				if hp.ip == "" || hp.ip == "::" {
					hp.ip = wildcardIP
				}
				if hp.protocol == "" {
					hp.protocol = api.ProtocolTCP
				}
				x.ports = append(x.ports, hp)
			}
		}
	}
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		if v.PersistentVolumeClaim != nil {
			x.claims = append(x.claims, v.PersistentVolumeClaim.ClaimName)
		}
		if v.HostPath == nil || v.HostPath.Type != hostPathBlockDevice {
			continue
		}
		used, readOnly := volumeMounts(spec, v.Name)
		if used {
			x.devices = append(x.devices, deviceUse{path: path.Clean(v.HostPath.Path), readOnly: readOnly})
		}
	}
	pi.controller, _ = controllerOf(pod)
	var errs []error
	compile := func(dst *[]affinityTerm, field string, req []api.PodAffinityTerm, pref []api.WeightedPodAffinityTerm) {
		terms, err := compileTerms(pod, req, pref)
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.affinity.%s%w", field, err))
			return
		}
		*dst = terms
	}
	if a := spec.Affinity; a != nil {
		if pa := a.PodAffinity; pa != nil {
			compile(&x.reqAffinity, "podAffinity.requiredDuringSchedulingIgnoredDuringExecution", pa.RequiredDuringSchedulingIgnoredDuringExecution, nil)
			compile(&x.prefAffinity, "podAffinity.preferredDuringSchedulingIgnoredDuringExecution", nil, pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if pa := a.PodAntiAffinity; pa != nil {
			compile(&x.reqAnti, "podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution", pa.RequiredDuringSchedulingIgnoredDuringExecution, nil)
			compile(&x.prefAnti, "podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution", nil, pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
	}
	pi.podExtra = &noExtra
	if len(x.scalar)+len(x.ports)+len(x.devices)+len(x.claims)+x.numTerms() > 0 {
		own := x // x stays on the stack: most pods allocate no podExtra
		pi.podExtra = &own
	}
	return pi, errors.Join(errs...)
}

// numTerms is how many affinity terms the pod has.
func (x *podExtra) numTerms() int {
	return len(x.reqAffinity) + len(x.reqAnti) + len(x.prefAffinity) + len(x.prefAnti)
}

// controllerOf returns the UID and kind of the pod's owner reference
// marked controller (the first, should there be several), or "".
func controllerOf(pod *api.Pod) (uid, kind string) {
	for _, o := range pod.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			return o.UID, o.Kind
		}
	}
	return "", ""
}

// hostPathBlockDevice is the hostPath type of a block device: the host's
// counterpart of the cloud disks Kubernetes' NoDiskConflict guards.
const hostPathBlockDevice = "BlockDevice"

// volumeMounts reports whether any container mounts the volume, and
// whether every mount of it is read-only.
func volumeMounts(spec *api.PodSpec, name string) (used, readOnly bool) {
	readOnly = true
	for _, cs := range [][]api.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			for _, m := range cs[i].VolumeMounts {
				if m.Name == name {
					used = true
					readOnly = readOnly && m.ReadOnly
				}
			}
		}
	}
	return used, readOnly
}

// compileTerms parses the selectors of required (weight 1) or preferred
// terms. A term without namespaces applies to the pod's own namespace.
func compileTerms(pod *api.Pod, req []api.PodAffinityTerm, pref []api.WeightedPodAffinityTerm) ([]affinityTerm, error) {
	n := len(req) + len(pref)
	if n == 0 {
		return nil, nil
	}
	out := make([]affinityTerm, 0, n)
	one := func(t *api.PodAffinityTerm, w int64, where string) error {
		sel, err := api.SelectorFromLabelSelector(t.LabelSelector)
		if err != nil {
			return fmt.Errorf("%s.labelSelector: %w", where, err)
		}
		ns := t.Namespaces
		if len(ns) == 0 {
			ns = []string{pod.Namespace}
		}
		out = append(out, affinityTerm{sel: sel, namespaces: ns, key: t.TopologyKey, weight: w})
		return nil
	}
	for i := range req {
		if err := one(&req[i], 1, fmt.Sprintf("[%d]", i)); err != nil {
			return nil, err
		}
	}
	for i := range pref {
		if pref[i].Weight == 0 {
			continue
		}
		if err := one(&pref[i].PodAffinityTerm, int64(pref[i].Weight), fmt.Sprintf("[%d].podAffinityTerm", i)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// normalizeImage writes an image reference in one form, so that "nginx",
// "docker.io/nginx:latest" and "docker.io/library/nginx:latest" compare
// equal: a registry domain, a path, and a tag (":latest" when none is
// given) or a digest.
func normalizeImage(ref string) string {
	name, suffix := ref, ""
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		name, suffix = ref[:i], ref[i:]
	} else if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		name, suffix = ref[:i], ref[i:]
	}
	if suffix == "" {
		suffix = ":latest"
	}
	domain, rest, found := strings.Cut(name, "/")
	if !found || (!strings.ContainsAny(domain, ".:") && domain != "localhost") {
		domain, rest = "docker.io", name
	}
	if domain == "docker.io" && !strings.Contains(rest, "/") {
		rest = "library/" + rest
	}
	return domain + "/" + rest + suffix
}
