package api

import (
	"net/url"
	"strings"
)

// ClusterVersion is the cluster's one version object (config.openshift.io/v1,
// named "version"), as in OpenShift (SPEC UPD-1): the spec says which
// update service and channel to follow and which release to run; the
// status, written by the control plane only, says what runs, what
// updates there are and which of them carry risks for this cluster.
type ClusterVersion struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Spec       ClusterVersionSpec   `json:"spec"`
	Status     ClusterVersionStatus `json:"status,omitzero"`
}

// ClusterVersionName is the only name a ClusterVersion may have.
const ClusterVersionName = "version"

// ClusterVersionSpec is what an administrator sets.
type ClusterVersionSpec struct {
	ClusterID string `json:"clusterID,omitempty"`
	// Channel is the update graph's channel to follow ("stable-1").
	Channel string `json:"channel,omitempty"`
	// Upstream is the update service's graph URL (https://HOST/api/upgrades_info/v1/graph),
	// or a file:// URL of a graph in Cincinnati's JSON for a site
	// without a network path to one.
	Upstream string `json:"upstream,omitempty"`
	// DesiredUpdate is the release to run.
	DesiredUpdate *Update `json:"desiredUpdate,omitempty"`
	// TrustedKeys are the PEM public keys (ECDSA P-256 or Ed25519) a
	// release's signature must verify with before anything of it is
	// applied (an outpost field: OpenShift builds its keys into the
	// CVO). Only a cluster-admin can change the ClusterVersion.
	TrustedKeys string `json:"trustedKeys,omitempty"`
}

// Update names a release by version, payload or both.
type Update struct {
	Version string `json:"version,omitempty"`
	Image   string `json:"image,omitempty"`
	// Force skips the update's precondition checks (not the signature).
	Force bool `json:"force,omitempty"`
	// AcceptRisks names the risks of a conditional update the
	// administrator accepts (outpost's --allow-not-recommended records
	// them).
	AcceptRisks []string `json:"acceptRisks,omitempty"`
}

// ClusterVersionStatus is what the control plane reports.
type ClusterVersionStatus struct {
	Desired            Release                   `json:"desired,omitzero"`
	History            []UpdateHistory           `json:"history,omitempty"`
	ObservedGeneration int64                     `json:"observedGeneration,omitempty"`
	Conditions         []MachineCondition        `json:"conditions,omitempty"`
	AvailableUpdates   []Release                 `json:"availableUpdates"`
	ConditionalUpdates []ConditionalUpdateStatus `json:"conditionalUpdates,omitempty"`
	// ControlPlane is the servers' binary update while a release is
	// applied (an outpost field): which server updates now.
	ControlPlane *ControlPlaneUpdate `json:"controlPlane,omitempty"`
}

// ControlPlaneUpdate is the servers' part of applying a release (SPEC
// UPD-6): one server at a time is named, and only the named one swaps
// its binary for the release's.
type ControlPlaneUpdate struct {
	Version string `json:"version"`
	Image   string `json:"image"`
	// Server is the server asked to update now; Since when it was asked.
	Server string `json:"server,omitempty"`
	Since  *Time  `json:"since,omitempty"`
}

// Release is one release: its version, payload, notes and channels.
type Release struct {
	Version  string   `json:"version,omitempty"`
	Image    string   `json:"image,omitempty"`
	URL      string   `json:"url,omitempty"`
	Channels []string `json:"channels,omitempty"`
}

// UpdateHistory is one release the cluster moved to.
type UpdateHistory struct {
	State          string `json:"state"`
	StartedTime    Time   `json:"startedTime"`
	CompletionTime *Time  `json:"completionTime,omitempty"`
	Version        string `json:"version"`
	Image          string `json:"image,omitempty"`
	Verified       bool   `json:"verified"`
	AcceptedRisks  string `json:"acceptedRisks,omitempty"`
}

// Update history states, as OpenShift names them.
const (
	UpdateCompleted = "Completed"
	UpdatePartial   = "Partial"
)

// ConditionalUpdateStatus is an update with risks, and whether it is
// recommended for this cluster (a Recommended condition).
type ConditionalUpdateStatus struct {
	Release    Release            `json:"release"`
	Risks      []ConditionalRisk  `json:"risks"`
	Conditions []MachineCondition `json:"conditions"`
}

// ConditionalRisk is a risk as the update graph gives it.
type ConditionalRisk struct {
	URL           string                `json:"url"`
	Name          string                `json:"name"`
	Message       string                `json:"message"`
	MatchingRules []ConditionalRiskRule `json:"matchingRules"`
}

// ConditionalRiskRule is a risk's rule: Always, Expression (outpost's),
// or PromQL (kept, not evaluated).
type ConditionalRiskRule struct {
	Type       string          `json:"type"`
	Expression *RiskExpression `json:"expression,omitempty"`
	PromQL     *RiskPromQL     `json:"promql,omitempty"`
}

// RiskExpression is an Expression rule's body.
type RiskExpression struct {
	Expression string `json:"expression"`
}

// RiskPromQL is a PromQL rule's body.
type RiskPromQL struct {
	PromQL string `json:"promql"`
}

// ClusterVersion condition types.
const (
	CVAvailable        = "Available"
	CVProgressing      = "Progressing"
	CVFailing          = "Failing"
	CVRetrievedUpdates = "RetrievedUpdates"
	CVRecommended      = "Recommended"
	// CVReleaseAccepted says whether the desired release was fetched,
	// verified and validated, or why not.
	CVReleaseAccepted = "ReleaseAccepted"
)

func validateClusterVersion(cv *ClusterVersion) ErrorList {
	var errs ErrorList
	if cv.Name != "" && cv.Name != ClusterVersionName {
		errs = append(errs, Invalid(Root("metadata").Child("name"), cv.Name, `must be "version": the cluster has one ClusterVersion`))
	}
	sp := Root("spec")
	if u := cv.Spec.Upstream; u != "" {
		pu, err := url.Parse(u)
		switch {
		case err != nil:
			errs = append(errs, Invalid(sp.Child("upstream"), u, err.Error()))
		case pu.Scheme != "https" && pu.Scheme != "http" && pu.Scheme != "file":
			errs = append(errs, Invalid(sp.Child("upstream"), u, "an https:// (or http://) update service URL, or a file:// URL of a graph"))
		case pu.Scheme != "file" && pu.Host == "":
			errs = append(errs, Invalid(sp.Child("upstream"), u, "names no host"))
		}
	}
	if c := cv.Spec.Channel; c != "" && strings.ContainsAny(c, " /?&#") {
		errs = append(errs, Invalid(sp.Child("channel"), c, "a channel name has no spaces, slashes, ?, & or #"))
	}
	if d := cv.Spec.DesiredUpdate; d != nil && d.Version == "" && d.Image == "" {
		errs = append(errs, Required(sp.Child("desiredUpdate"), "a version, an image, or both"))
	} else if d != nil && d.Image != "" && !PinnedByDigest(d.Image) {
		errs = append(errs, Invalid(sp.Child("desiredUpdate", "image"), d.Image, "a payload is named pinned by its digest: URL@sha256:<64 hex digits> (the updates adm upgrade lists are)"))
	}

	if k := cv.Spec.TrustedKeys; k != "" {
		if _, err := ParseTrustedKeys([]byte(k)); err != nil {
			errs = append(errs, Invalid(sp.Child("trustedKeys"), "(PEM)", err.Error()))
		}
	}
	return errs
}

// PinnedByDigest reports whether ref ends in @sha256:<64 hex digits>.
func PinnedByDigest(ref string) bool {
	i := strings.LastIndex(ref, "@sha256:")
	if i <= 0 {
		return false
	}
	h := ref[i+len("@sha256:"):]
	if len(h) != 64 {
		return false
	}
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
