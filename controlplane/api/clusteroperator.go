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

// An agent's binary update (SPEC UPD-6), through its Node's annotations:
// the cluster version controller sets AnnotationAgentBinary to
// "VERSION sha256:DIGEST" (the release's binary for the node's
// platform, whose signature the control plane verified); the agent
// downloads that binary from the API by digest, runs it on trial, and
// reports AnnotationAgentBinaryState ("ready", "starting", "trial", or
// "unsupported: why") and, after a roll back,
// AnnotationAgentBinaryFailure ("VERSION: reason").
const (
	AnnotationAgentBinary        = "update.outpost.io/agent-binary"
	AnnotationAgentBinaryState   = "update.outpost.io/agent-binary-state"
	AnnotationAgentBinaryFailure = "update.outpost.io/agent-binary-failure"
	// AgentsOperator is the ClusterOperator of the agents' binaries.
	AgentsOperator = "node-agents"
)

// States of a server's or agent's binary, as it reports them (the
// server's raft status Info, an agent's Node annotation).
const (
	// SelfUpdateReady: healthy (a server: a caught-up voter) on a good
	// binary, ready to replace it.
	SelfUpdateReady    = "ready"
	SelfUpdateStarting = "starting"
	// SelfUpdateUpdating: fetching and staging a new binary, about to
	// restart on it.
	SelfUpdateUpdating = "updating"
	SelfUpdateTrial    = "trial"
	// SelfUpdateUnsupported starts the state of one that cannot replace
	// its binary: "unsupported: why".
	SelfUpdateUnsupported = "unsupported"
)
