package scheduler

import "github.com/outpost-edge/outpost/controlplane/api"

// Defaults the scoring functions assume for a container that requests no
// CPU or memory, as Kubernetes does, so that pods without requests still
// spread instead of piling onto the node that looks empty.
const (
	defaultMilliCPURequest = 100               // 0.1 core
	defaultMemoryRequest   = 200 * 1024 * 1024 // 200 MiB
)

// Resources is an amount of each resource the scheduler counts: CPU in
// millicores, memory and ephemeral storage in bytes, extended resources
// (anything else, such as example.com/gpu or hugepages-2Mi) in thousandths.
type Resources struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	Scalar           []ScalarResource
}

// ScalarResource is an extended resource and its amount in thousandths.
type ScalarResource struct {
	Name  string
	Milli int64
}

// scalar returns the amount of the extended resource name.
func (r *Resources) scalar(name string) int64 {
	for i := range r.Scalar {
		if r.Scalar[i].Name == name {
			return r.Scalar[i].Milli
		}
	}
	return 0
}

// addScalar adds d to the extended resource name, dropping it at zero.
func (r *Resources) addScalar(name string, d int64) {
	for i := range r.Scalar {
		if r.Scalar[i].Name == name {
			r.Scalar[i].Milli += d
			if r.Scalar[i].Milli == 0 {
				r.Scalar = append(r.Scalar[:i], r.Scalar[i+1:]...)
			}
			return
		}
	}
	if d != 0 {
		r.Scalar = append(r.Scalar, ScalarResource{Name: name, Milli: d})
	}
}

// add adds (sign 1) or subtracts (sign -1) o.
func (r *Resources) add(o *Resources, sign int64) {
	r.MilliCPU += sign * o.MilliCPU
	r.Memory += sign * o.Memory
	r.EphemeralStorage += sign * o.EphemeralStorage
	for _, s := range o.Scalar {
		r.addScalar(s.Name, sign*s.Milli)
	}
}

// set records q under the resource name; pods is returned apart because
// only nodes offer it.
func (r *Resources) set(name string, q api.Quantity) {
	switch name {
	case api.ResourceCPU:
		r.MilliCPU = q.MilliValue()
	case api.ResourceMemory:
		r.Memory = q.Value()
	case api.ResourceEphemeralStorage:
		r.EphemeralStorage = q.Value()
	case api.ResourcePods:
	default:
		r.addScalar(name, q.MilliValue()-r.scalar(name))
	}
}

// fromList converts a node's allocatable list.
func fromList(rl api.ResourceList) (r Resources, pods int64) {
	for name, q := range rl {
		if name == api.ResourcePods {
			pods = q.Value()
			continue
		}
		r.set(name, q)
	}
	return r, pods
}

// podRequests is what a pod asks of a node for PodFitsResources: the sum
// over its containers, or, per resource, the largest init container when
// that is more (init containers run one at a time, before the others).
// nonZeroCPU and nonZeroMem are what the scoring functions count: the same
// sum with the defaults above for containers that request nothing.
func podRequests(spec *api.PodSpec) (req Resources, nonZeroCPU, nonZeroMem int64) {
	for i := range spec.Containers {
		rl := spec.Containers[i].Resources.Requests
		for name, q := range rl {
			var one Resources
			one.set(name, q)
			req.add(&one, 1)
		}
		cpu, ok := rl[api.ResourceCPU]
		if ok {
			nonZeroCPU += cpu.MilliValue()
		} else {
			nonZeroCPU += defaultMilliCPURequest
		}
		mem, ok := rl[api.ResourceMemory]
		if ok {
			nonZeroMem += mem.Value()
		} else {
			nonZeroMem += defaultMemoryRequest
		}
	}
	for i := range spec.InitContainers {
		for name, q := range spec.InitContainers[i].Resources.Requests {
			switch name {
			case api.ResourceCPU:
				req.MilliCPU = max(req.MilliCPU, q.MilliValue())
			case api.ResourceMemory:
				req.Memory = max(req.Memory, q.Value())
			case api.ResourceEphemeralStorage:
				req.EphemeralStorage = max(req.EphemeralStorage, q.Value())
			case api.ResourcePods:
			default:
				if v := q.MilliValue(); v > req.scalar(name) {
					req.addScalar(name, v-req.scalar(name))
				}
			}
		}
	}
	return req, nonZeroCPU, nonZeroMem
}

// isBestEffort reports whether no container of the pod requests or limits
// CPU or memory: the pods CheckNodeMemoryPressure keeps off.
func isBestEffort(spec *api.PodSpec) bool {
	for _, cs := range [][]api.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			r := &cs[i].Resources
			for _, rl := range []api.ResourceList{r.Requests, r.Limits} {
				if _, ok := rl[api.ResourceCPU]; ok {
					return false
				}
				if _, ok := rl[api.ResourceMemory]; ok {
					return false
				}
			}
		}
	}
	return true
}
