package api

// SchedulerPolicy is the policy in force of one named scheduler (SPEC
// SCH-2, SCH-12). It lives in the replicated store so that every leader
// runs the same schedulers with the same policies: a failover must not
// change how pods are placed because the new leader's policy file
// differs. Its name is the scheduler's (pods choose one with
// spec.schedulerName); the leader runs one scheduler per SchedulerPolicy.
// Served under the outpost.io group to cluster admins.
type SchedulerPolicy struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Spec       SchedulerPolicySpec `json:"spec"`
}

// SchedulerPolicySpec holds the policy document.
type SchedulerPolicySpec struct {
	// Policy is a `kind: Policy` document, JSON or YAML, exactly as the
	// manual writes policy files. The server refuses one that does not
	// parse, naming the problems by path under spec.policy.
	Policy string `json:"policy"`
	// Source says where the policy came from, when a server's policy file
	// wrote it ("SERVER:FILE", or "SERVER:default" for the built-in
	// default policy); empty when it was written through the API.
	Source string `json:"source,omitempty"`
}

// MaxSchedulerPolicyBytes bounds spec.policy: a policy is a few kilobytes.
const MaxSchedulerPolicyBytes = 256 << 10
