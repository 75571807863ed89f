package api

import (
	"reflect"
	"strconv"
)

// volumeType is the Go type whose Kubernetes-only fields are volume
// sources outpost cannot mount.
var volumeType = reflect.TypeFor[Volume]()

// noteVolumeSource records, while the slow-path decoder walks a Volume at
// w.path[:at], that it skipped the Kubernetes-only source key. Validation
// then names the source the user gave instead of saying none was given.
func (w *walker) noteVolumeSource(at int, key string) {
	if w.volumeSources == nil {
		w.volumeSources = map[string][]string{}
	}
	p := string(w.path[:at])
	w.volumeSources[p] = append(w.volumeSources[p], key)
}

// setUnsupportedSources copies what noteVolumeSource recorded, keyed by
// the JSON path of each volume, into the decoded object's volumes.
func setUnsupportedSources(obj Object, sources map[string][]string) {
	spec, path := PodSpecOf(obj)
	if spec == nil {
		return
	}
	prefix := path + ".volumes["
	for i := range spec.Volumes {
		if s, ok := sources[prefix+strconv.Itoa(i)+"]"]; ok {
			spec.Volumes[i].UnsupportedSources = s
		}
	}
}
