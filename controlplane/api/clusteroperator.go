package api

// ClusterOperator is one component's status during and after a release's
// application (config.openshift.io/v1, cluster-scoped; SPEC UPD-1, UPD-5),
// as OpenShift's operators report theirs: Available, Progressing and
// Degraded, and the versions it runs. outpost's cluster version
// controller writes them: "control-plane" for the servers' binary, one
// per component of the release's manifests, its status derived from the
// rollouts of the objects it applied.
type ClusterOperator struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Spec       ClusterOperatorSpec   `json:"spec"`
	Status     ClusterOperatorStatus `json:"status,omitzero"`
}

// ClusterOperatorSpec is empty, as OpenShift's is.
type ClusterOperatorSpec struct{}

// ClusterOperatorStatus is what the component reports.
type ClusterOperatorStatus struct {
	Conditions     []MachineCondition `json:"conditions,omitempty"`
	Versions       []OperandVersion   `json:"versions,omitempty"`
	RelatedObjects []RelatedObject    `json:"relatedObjects,omitempty"`
}

// OperandVersion is a version a component runs; "operator" is the
// release's version once the component reached it.
type OperandVersion struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// RelatedObject names an object a component manages (OpenShift's
// ObjectReference of a ClusterOperator, by resource rather than kind).
type RelatedObject struct {
	Group     string `json:"group"`
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// ClusterOperator condition types.
const (
	OperatorAvailable   = "Available"
	OperatorProgressing = "Progressing"
	OperatorDegraded    = "Degraded"
)

// ControlPlaneOperator is the ClusterOperator of the servers' own binary.
const ControlPlaneOperator = "control-plane"
