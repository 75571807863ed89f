package api

// Zone states (SPEC TNT-8), as Kubernetes names them.
const (
	ZoneNormal            = "Normal"
	ZonePartialDisruption = "PartialDisruption"
	ZoneFullDisruption    = "FullDisruption"
)

// ZoneList is the reply of GET /apis/outpost.io/v1/zones: the zones of
// topology.kubernetes.io/zone as the leader's node lifecycle controller
// last counted them. Zones are not stored objects: the leader derives
// them from the nodes' Ready conditions, so the list starts empty after
// an election until the controller's first count.
type ZoneList struct {
	TypeMeta `json:",inline"`
	// MasterDisruption is true while every zone is in FullDisruption: the
	// control plane takes itself for the one cut off and evicts nothing.
	MasterDisruption bool         `json:"masterDisruption"`
	Items            []ZoneStatus `json:"items"`
}

// ZoneStatus is one zone's health and eviction rate.
type ZoneStatus struct {
	// Name is the zone label's value; "" holds the nodes without one.
	Name  string `json:"name"`
	State string `json:"state"`
	// Nodes counts the zone's nodes that an agent reports (with a Ready
	// condition), Ready those of them that are ready.
	Nodes int `json:"nodes"`
	Ready int `json:"ready"`
	// EvictionRate is how many nodes per second may be tainted for
	// eviction in the zone's state (0: none).
	EvictionRate float64 `json:"evictionRate"`
	// Evictions counts the nodes tainted for eviction in the zone since
	// this server started.
	Evictions int64 `json:"evictions"`
}
