package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strconv"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/runtime"
)

// containerID names attempt n of a pod's container. containerd allows 76
// characters of [A-Za-z0-9._-]; a hash of the pod's UID and the name keeps
// the ID unique, the name keeps it readable.
func containerID(podUID, name string, attempt int) string {
	sum := sha256.Sum256([]byte(podUID + "/" + name))
	short := name
	if len(short) > 40 {
		short = short[:40]
	}
	return hex.EncodeToString(sum[:6]) + "-" + short + "-" + strconv.Itoa(attempt)
}

// containerSpec is what the runtime is asked to create for container c of
// pod at attempt n.
func containerSpec(pod *api.Pod, c *api.Container, attempt int, imageRef string) (runtime.ContainerSpec, error) {
	spec := runtime.ContainerSpec{
		ID:         containerID(string(pod.UID), c.Name, attempt),
		Image:      imageRef,
		Command:    c.Command,
		Args:       c.Args,
		WorkingDir: c.WorkingDir,
		Labels: map[string]string{
			runtime.LabelPodUID:       string(pod.UID),
			runtime.LabelPodNamespace: pod.Namespace,
			runtime.LabelPodName:      pod.Name,
			runtime.LabelContainer:    c.Name,
			runtime.LabelAttempt:      strconv.Itoa(attempt),
		},
	}
	for _, e := range c.Env {
		spec.Env = append(spec.Env, e.Name+"="+e.Value)
	}
	vols := make(map[string]*api.Volume, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		vols[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	for i, m := range c.VolumeMounts {
		v := vols[m.Name]
		switch {
		case v == nil:
			return spec, fmt.Errorf("volumeMounts[%d]: no volume %q in the pod", i, m.Name)
		case v.HostPath != nil:
			host := v.HostPath.Path
			if m.SubPath != "" {
				host = path.Join(host, m.SubPath)
			}
			spec.Mounts = append(spec.Mounts, runtime.Mount{HostPath: host, ContainerPath: m.MountPath, ReadOnly: m.ReadOnly})
		default:
			return spec, fmt.Errorf("volumeMounts[%d]: volume %q: only hostPath volumes are supported on nodes yet", i, m.Name)
		}
	}
	lim, req := c.Resources.Limits, c.Resources.Requests
	if q, ok := lim["cpu"]; ok {
		spec.Resources.CPUMillis = q.MilliValue()
	}
	if q, ok := req["cpu"]; ok {
		spec.Resources.CPURequestMillis = q.MilliValue()
	} else if q, ok := lim["cpu"]; ok {
		spec.Resources.CPURequestMillis = q.MilliValue()
	}
	if q, ok := lim["memory"]; ok {
		spec.Resources.MemoryBytes = q.Value()
	}
	return spec, nil
}

// pullPolicy is c's policy with Kubernetes' default: Always for :latest
// or no tag, IfNotPresent otherwise.
func pullPolicy(c *api.Container) runtime.PullPolicy {
	switch c.ImagePullPolicy {
	case api.PullAlways:
		return runtime.PullAlways
	case api.PullNever:
		return runtime.PullNever
	case api.PullIfNotPresent:
		return runtime.PullIfNotPresent
	}
	return runtime.PullIfNotPresent
}
