package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/release"
)

// The cluster version controller (SPEC UPD-1, UPD-2), the Cluster Version
// Operator's status half: it reports the version the cluster runs, asks
// the channel's update graph of spec.upstream every few minutes (and at
// once when the channel or upstream changes), and keeps
// availableUpdates and conditionalUpdates, each conditional update's
// risks evaluated against the cluster now (its nodes, version, channel,
// architecture). An upstream that fails keeps the last good answer, with
// RetrievedUpdates=False and the reason. A spec.desiredUpdate is
// resolved (a version through the updates listed; a not recommended one
// only with its risks accepted or force), fetched, verified against
// spec.trustedKeys and its manifests validated, with ReleaseAccepted
// saying so or why not (UPD-4), then applied (clusterversion_apply.go).

const componentClusterVersion = "cluster-version-controller"

var clusterVersions = api.ResourceForKind("ClusterVersion")

// graphPollInterval is how often the update graph is asked again.
const graphPollInterval = 5 * time.Minute

// FetchGraph reads an update graph's bytes from a URL (with the query
// of channel, arch, version and cluster id already on it).
type FetchGraph func(ctx context.Context, u string) ([]byte, error)

type clusterVersionController struct {
	*loop
	s          *shared
	inf        *controller.Informer
	version    string
	fetch      FetchGraph
	releaseDir string
	raft       Raft
	// updating is set by a sync that left an update in progress: it is
	// looked at again in applyPoll.
	updating bool

	// accepting is the desired release last checked, by key; checking
	// the key of the one being checked in the background (a download may
	// take minutes: the status goes on meanwhile).
	amu          sync.Mutex
	accepting    map[string]acceptance
	checking     string
	fetchPayload FetchPayload
	bg           sync.WaitGroup

	mu sync.Mutex
	// The last answer of the upstream, for the upstream and channel it
	// was asked with.
	asked               string // upstream + " " + channel
	fetched             time.Time
	graph               *release.Graph
	failReason, failMsg string
}

// FetchPayload copies a payload into dir and opens it (release.Fetch).
type FetchPayload func(ctx context.Context, ref, dir string) (*release.Payload, error)

func newClusterVersionController(s *shared, inf *controller.Informer, version string, fetch FetchGraph, fetchPayload FetchPayload, releaseDir string, raft Raft) *clusterVersionController {
	if fetchPayload == nil {
		fetchPayload = release.Fetch
	}
	if fetch == nil {
		fetch = release.GetGraph
	}
	if version == "" {
		version = "dev"
	}
	if releaseDir == "" {
		releaseDir = filepath.Join(os.TempDir(), "outpost-releases")
	}
	c := &clusterVersionController{s: s, inf: inf, version: version, fetch: fetch, fetchPayload: fetchPayload, releaseDir: releaseDir, raft: raft, accepting: map[string]acceptance{}}
	c.loop = newLoop(s, "clusterversion", c.sync)
	return c
}

func (c *clusterVersionController) onChange(controller.Event) { c.q.Add(api.ClusterVersionName) }

func (c *clusterVersionController) sync(ctx context.Context, name string) (time.Duration, error) {
	obj, ok := c.inf.Get("", name)
	if !ok || name != api.ClusterVersionName {
		return 0, nil
	}
	cv := obj.(*api.ClusterVersion)
	now := c.s.now()
	c.updating = false
	st := c.status(ctx, cv, now)
	after := graphPollInterval
	if c.retryDue() {
		after = acceptRetry
	}
	if c.updating {
		after = applyPoll
	}
	if reflect.DeepEqual(st, cv.Status) {
		return after, nil
	}
	cp, err := controller.Copy(cv)
	if err != nil {
		return 0, err
	}
	upd := cp.(*api.ClusterVersion)
	upd.Status = st
	if _, err := c.s.client.UpdateStatus(ctx, upd); err != nil {
		return 0, ignoreGone(err)
	}
	return after, nil
}

// status is cv's status now: the running version, the updates from the
// graph (asked again when due), the conditions.
func (c *clusterVersionController) status(ctx context.Context, cv *api.ClusterVersion, now time.Time) api.ClusterVersionStatus {
	st := api.ClusterVersionStatus{ObservedGeneration: cv.Generation, AvailableUpdates: []api.Release{}}
	st.History = slices.Clone(cv.Status.History)
	if len(st.History) == 0 || st.History[0].Version != c.version && st.History[0].State == api.UpdateCompleted {
		// The version the control plane runs, installed or put there by
		// hand (a package upgrade): recorded as it is found.
		at := now
		if len(st.History) == 0 && cv.CreationTimestamp != nil {
			at = cv.CreationTimestamp.Time
		}
		st.History = append([]api.UpdateHistory{{State: api.UpdateCompleted, StartedTime: *api.NewTime(at), CompletionTime: api.NewTime(at), Version: c.version}}, st.History...)
	}
	st.Desired = api.Release{Version: c.version}

	graph, reason, msg := c.retrieve(ctx, cv, now)
	retrieved := api.MachineCondition{Type: api.CVRetrievedUpdates, Status: api.ConditionTrue, Reason: "AsExpected", Message: "updates retrieved from " + cv.Spec.Upstream}
	if reason != "" {
		retrieved = api.MachineCondition{Type: api.CVRetrievedUpdates, Status: api.ConditionFalse, Reason: reason, Message: msg}
	}
	if graph != nil {
		facts := release.Facts{Version: c.version, Channel: cv.Spec.Channel, Arch: runtime.GOARCH}
		for _, o := range c.s.nodeInf.List() {
			facts.NodeLabels = append(facts.NodeLabels, o.(*api.Node).Labels)
		}
		if i := slices.IndexFunc(graph.Nodes, func(n release.GraphNode) bool { return n.Version == c.version }); i >= 0 {
			st.Desired = releaseOf(graph.Nodes[i].Version, graph.Nodes[i].Payload, graph.Nodes[i].Metadata)
		}
		avail, cond, err := graph.Updates(c.version, facts)
		if err != nil {
			retrieved = api.MachineCondition{Type: api.CVRetrievedUpdates, Status: api.ConditionFalse, Reason: "VersionNotFound",
				Message: fmt.Sprintf("Unable to retrieve available updates: the current version %s is not in the %s channel's graph", c.version, cv.Spec.Channel)}
		}
		for _, u := range avail {
			st.AvailableUpdates = append(st.AvailableUpdates, releaseOf(u.Version, u.Payload, u.Metadata))
		}
		for _, u := range cond {
			cs := api.ConditionalUpdateStatus{Release: releaseOf(u.Version, u.Payload, u.Metadata)}
			cs.Risks = u.Risks
			status := api.ConditionFalse
			if u.Recommended {
				status = api.ConditionTrue
			}
			rec := api.MachineCondition{Type: api.CVRecommended, Status: status, Reason: u.Reason, Message: u.Message}
			cs.Conditions = []api.MachineCondition{keepTransition(rec, conditionalPrev(cv, u.Version), now)}
			st.ConditionalUpdates = append(st.ConditionalUpdates, cs)
		}
	}
	done := "Done applying " + c.version
	progressing := api.MachineCondition{Type: api.CVProgressing, Status: api.ConditionFalse, Message: "Cluster version is " + c.version}
	conds := []api.MachineCondition{
		{Type: api.CVAvailable, Status: api.ConditionTrue, Message: done},
		{Type: api.CVFailing, Status: api.ConditionFalse},
		progressing,
		retrieved,
	}
	if d := cv.Spec.DesiredUpdate; d != nil && !completed(st.History, d) {
		if cv.Status.ControlPlane != nil {
			// Kept while the release is fetched again (a new leader):
			// the server named goes on meanwhile.
			cp := *cv.Status.ControlPlane
			st.ControlPlane = &cp
		}
		acc := c.accept(ctx, cv, d, now)
		ra := api.MachineCondition{Type: api.CVReleaseAccepted, Status: api.ConditionFalse, Reason: acc.reason, Message: acc.message}
		if acc.pending {
			ra.Status = api.ConditionUnknown
		}
		if acc.ok {
			ra.Status = api.ConditionTrue
			st.Desired = api.Release{Version: acc.version, Image: acc.image}
			if graph != nil {
				if i := slices.IndexFunc(graph.Nodes, func(n release.GraphNode) bool { return n.Version == acc.version }); i >= 0 {
					st.Desired = releaseOf(acc.version, acc.image, graph.Nodes[i].Metadata)
				}
			}
			c.progress(ctx, cv, d, acc, &st, conds, now)
		}
		conds = append(conds, ra)
	}
	if len(st.History) > 0 && st.History[0].State == api.UpdatePartial && conds[2].Status == api.ConditionFalse && conds[1].Status == api.ConditionFalse {
		// An update that is not going on (its desired update withdrawn)
		// leaves Partial in the history, as OpenShift's does.
		conds[2].Message = fmt.Sprintf("Cluster version is %s; the update to %s is not complete", c.version, st.History[0].Version)
	}
	for _, cond := range conds {
		st.Conditions = append(st.Conditions, keepTransition(cond, cv.Status.Conditions, now))
	}
	return st
}

// completed reports whether d names the release the history's last
// completed update moved to (or the version installed).
func completed(h []api.UpdateHistory, d *api.Update) bool {
	if len(h) == 0 || h[0].State != api.UpdateCompleted {
		return false
	}
	if d.Image != "" {
		return h[0].Image == d.Image
	}
	return h[0].Version == d.Version
}

// progress starts the accepted update (after its preconditions) or moves
// it on, and sets the Progressing and Failing conditions (conds[2] and
// conds[1]).
func (c *clusterVersionController) progress(ctx context.Context, cv *api.ClusterVersion, d *api.Update, acc acceptance, st *api.ClusterVersionStatus, conds []api.MachineCondition, now time.Time) {
	if len(st.History) == 0 || st.History[0].State != api.UpdatePartial || st.History[0].Image != acc.image {
		if !d.Force {
			if why := c.preconditions(ctx); why != "" {
				conds[1] = api.MachineCondition{Type: api.CVFailing, Status: api.ConditionTrue, Reason: "PreconditionChecks",
					Message: fmt.Sprintf("Precondition checks for the update to %s failed: %s (desiredUpdate.force skips them)", acc.version, why)}
				conds[2].Message = fmt.Sprintf("Cluster version is %s; the update to %s waits for its preconditions", c.version, acc.version)
				return
			}
		}
		h := api.UpdateHistory{State: api.UpdatePartial, StartedTime: *api.NewTime(now), Version: acc.version, Image: acc.image, Verified: true,
			AcceptedRisks: strings.Join(d.AcceptRisks, ", ")}
		st.History = append([]api.UpdateHistory{h}, st.History...)
		st.ControlPlane = &api.ControlPlaneUpdate{Version: acc.version, Image: acc.image}
		c.s.log.Info("update started", "version", acc.version, "image", acc.image, "force", d.Force)
	} else if cv.Status.ControlPlane != nil {
		cp := *cv.Status.ControlPlane
		st.ControlPlane = &cp
	} else {
		st.ControlPlane = &api.ControlPlaneUpdate{Version: acc.version, Image: acc.image}
	}
	r := c.apply(ctx, st, acc, now)
	switch {
	case r.done:
		st.History[0].State, st.History[0].CompletionTime = api.UpdateCompleted, api.NewTime(now)
		st.ControlPlane = nil
		conds[0].Message = "Done applying " + acc.version
		conds[2].Message = "Cluster version is " + acc.version
		c.s.log.Info("update completed", "version", acc.version)
	case r.failReason != "":
		conds[1] = api.MachineCondition{Type: api.CVFailing, Status: api.ConditionTrue, Reason: r.failReason, Message: r.msg}
		conds[2] = api.MachineCondition{Type: api.CVProgressing, Status: api.ConditionFalse, Reason: r.failReason,
			Message: fmt.Sprintf("Error while reconciling %s: %s", acc.version, r.msg)}
	default:
		conds[2] = api.MachineCondition{Type: api.CVProgressing, Status: api.ConditionTrue, Message: r.waiting}
		c.updating = true
	}
}

// acceptance is what came of checking a desired release.
type acceptance struct {
	ok, pending     bool
	reason, message string
	version, image  string
	at              time.Time
	payload         *release.Payload
}

// acceptRetry is how soon a release whose fetch failed is fetched again.
const acceptRetry = time.Minute

// accept resolves the desired release and returns what its check found:
// the check (fetch, verify, validate) runs in the background once per
// desired release and key set, a failed fetch again after acceptRetry;
// until it ends the acceptance is pending.
func (c *clusterVersionController) accept(ctx context.Context, cv *api.ClusterVersion, d *api.Update, now time.Time) acceptance {
	image, refusal := resolveUpdate(cv, d)
	if h := cv.Status.History; len(h) > 0 && h[0].State == api.UpdatePartial && h[0].Image != "" && (d.Image == h[0].Image || d.Image == "" && d.Version == h[0].Version) {
		// Under way: a new leader on the new version lists no update to
		// it, and risks were judged when it started.
		image, refusal = h[0].Image, acceptance{}
	}
	if refusal.reason != "" {
		return refusal
	}
	key := image + " " + d.Version + " " + cv.Spec.TrustedKeys
	c.amu.Lock()
	defer c.amu.Unlock()
	if a, ok := c.accepting[key]; ok && (a.reason != "RetrievePayload" || now.Sub(a.at) < acceptRetry) {
		return a
	}
	pending := acceptance{pending: true, reason: "RetrievePayload", message: "fetching, verifying and validating " + image}
	if c.checking == key {
		return pending
	}
	c.checking = key
	keys, want := cv.Spec.TrustedKeys, *d
	c.bg.Go(func() {
		a := c.check(ctx, keys, want, image)
		a.at = c.s.now()
		c.amu.Lock()
		if c.checking == key { // else the desired release changed meanwhile: this one is moot
			c.accepting = map[string]acceptance{key: a} // one desired release at a time
			c.checking = ""
		}
		c.amu.Unlock()
		c.s.log.Info("desired release checked", "image", image, "accepted", a.ok, "reason", a.reason, "message", a.message)
		c.q.Add(api.ClusterVersionName)
	})
	return pending
}

// retryDue reports whether the last check failed to fetch its payload:
// it is tried again after acceptRetry.
func (c *clusterVersionController) retryDue() bool {
	c.amu.Lock()
	defer c.amu.Unlock()
	for _, a := range c.accepting {
		if a.reason == "RetrievePayload" {
			return true
		}
	}
	return false
}

// resolveUpdate finds the payload of d: its image, or its version among
// the updates listed. A conditional update that is not recommended,
// named by version or by image, needs its risks in acceptRisks; an image
// the graph does not list is taken as it is (the CLI asks for
// --allow-explicit-upgrade), its signature being the check.
func resolveUpdate(cv *api.ClusterVersion, d *api.Update) (string, acceptance) {
	matches := func(r api.Release) bool {
		if d.Image != "" {
			return r.Image == d.Image
		}
		return r.Version == d.Version
	}
	for _, r := range cv.Status.AvailableUpdates {
		if matches(r) {
			return r.Image, acceptance{}
		}
	}
	for _, cu := range cv.Status.ConditionalUpdates {
		if !matches(cu.Release) {
			continue
		}
		if len(cu.Conditions) > 0 && cu.Conditions[0].Status == api.ConditionTrue {
			return cu.Release.Image, acceptance{}
		}
		var missing []string
		for _, r := range cu.Risks {
			if !slices.Contains(d.AcceptRisks, r.Name) {
				missing = append(missing, r.Name)
			}
		}
		if len(missing) == 0 {
			return cu.Release.Image, acceptance{}
		}
		msg := ""
		if len(cu.Conditions) > 0 {
			msg = cu.Conditions[0].Message
		}
		return "", acceptance{reason: "NotRecommended", message: fmt.Sprintf("the update to %s is not recommended for this cluster (%s); accept its risks (%s) with outpost adm upgrade --to %s --allow-not-recommended",
			cu.Release.Version, msg, strings.Join(missing, ", "), cu.Release.Version)}
	}
	if d.Image != "" {
		return d.Image, acceptance{}
	}
	return "", acceptance{reason: "VersionNotFound", message: fmt.Sprintf("version %s is not an update of this cluster in channel %q: name its payload with --to-image", d.Version, cv.Spec.Channel)}
}

// check fetches, verifies and validates the payload.
func (c *clusterVersionController) check(ctx context.Context, trustedKeys string, d api.Update, image string) acceptance {
	if trustedKeys == "" {
		return acceptance{reason: "VerifyPayload", message: "the cluster trusts no release signing key: set spec.trustedKeys (PEM public keys) before updating"}
	}
	keys, err := api.ParseTrustedKeys([]byte(trustedKeys))
	if err != nil {
		return acceptance{reason: "VerifyPayload", message: "spec.trustedKeys: " + err.Error()}
	}
	p, err := c.fetchPayload(ctx, image, c.releaseDir)
	switch {
	case errors.Is(err, release.ErrDigest) || errors.Is(err, release.ErrInvalid):
		return acceptance{reason: "VerifyPayload", message: err.Error()}
	case err != nil:
		return acceptance{reason: "RetrievePayload", message: err.Error()}
	}
	if err := p.Verify(keys); err != nil {
		return acceptance{reason: "VerifyPayload", message: fmt.Sprintf("payload %s: %v", image, err)}
	}
	if !slices.ContainsFunc(p.Binaries, func(b release.Binary) bool { return b.Platform == "linux/"+runtime.GOARCH }) {
		return acceptance{reason: "PlatformMissing", message: fmt.Sprintf("payload %s has no outpost binary for linux/%s, which this control plane runs on", image, runtime.GOARCH)}
	}
	if d.Version != "" && p.Metadata.Version != d.Version {
		return acceptance{reason: "VersionMismatch", message: fmt.Sprintf("payload %s is version %s, not %s", image, p.Metadata.Version, d.Version)}
	}
	if problems := release.CheckManifests(p.Manifests); len(problems) > 0 {
		return acceptance{reason: "ManifestsInvalid", message: strings.Join(problems, "; ")}
	}
	return acceptance{ok: true, reason: "PayloadLoaded", version: p.Metadata.Version, image: image, payload: p,
		message: fmt.Sprintf("Payload loaded version=%q image=%q digest=%s, its signature verified by a trusted key", p.Metadata.Version, image, p.Digest)}
}

func conditionalPrev(cv *api.ClusterVersion, version string) []api.MachineCondition {
	for _, cu := range cv.Status.ConditionalUpdates {
		if cu.Release.Version == version {
			return cu.Conditions
		}
	}
	return nil
}

// keepTransition gives c the transition time of the condition of its
// type in prev when the status did not change, else now.
func keepTransition(c api.MachineCondition, prev []api.MachineCondition, now time.Time) api.MachineCondition {
	c.LastTransitionTime = api.NewTime(now)
	if i := slices.IndexFunc(prev, func(p api.MachineCondition) bool { return p.Type == c.Type }); i >= 0 && prev[i].Status == c.Status {
		c.LastTransitionTime = prev[i].LastTransitionTime
	}
	return c
}

func releaseOf(version, payload string, meta map[string]string) api.Release {
	r := api.Release{Version: version, Image: payload, URL: meta["url"]}
	for ch := range strings.SplitSeq(meta[release.ChannelsKey], ",") {
		if ch = strings.TrimSpace(ch); ch != "" {
			r.Channels = append(r.Channels, ch)
		}
	}
	slices.Sort(r.Channels)
	return r
}

// retrieve returns the channel's graph, asking the upstream when the
// last answer is older than graphPollInterval or for another upstream
// or channel; when asking fails, the last good graph with the reason.
func (c *clusterVersionController) retrieve(ctx context.Context, cv *api.ClusterVersion, now time.Time) (*release.Graph, string, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case cv.Spec.Upstream == "":
		c.graph, c.asked = nil, ""
		return nil, "NoUpstream", "Upstream is unset: set spec.upstream to an update service's graph URL, or a file:// URL of a graph (outpost adm release serve hosts one)"
	case cv.Spec.Channel == "":
		c.graph, c.asked = nil, ""
		return nil, "NoChannel", "The update channel has not been configured: outpost adm upgrade channel NAME"
	}
	key := cv.Spec.Upstream + " " + cv.Spec.Channel
	if key == c.asked && now.Sub(c.fetched) < graphPollInterval {
		return c.graph, c.failReason, c.failMsg
	}
	if key != c.asked {
		c.graph = nil
	}
	c.asked, c.fetched = key, now
	u, err := url.Parse(cv.Spec.Upstream)
	if err != nil {
		c.failReason, c.failMsg = "InvalidURI", err.Error()
		return c.graph, c.failReason, c.failMsg
	}
	if u.Scheme != "file" {
		q := u.Query()
		q.Set("channel", cv.Spec.Channel)
		q.Set("arch", runtime.GOARCH)
		q.Set("version", c.version)
		q.Set("id", cv.Spec.ClusterID)
		u.RawQuery = q.Encode()
	}
	data, err := c.fetch(ctx, u.String())
	if err != nil {
		c.failReason, c.failMsg = "RemoteFailed", fmt.Sprintf("Unable to retrieve available updates: %v", err)
		c.s.log.Warn("update graph", "upstream", cv.Spec.Upstream, "channel", cv.Spec.Channel, "error", err)
		return c.graph, c.failReason, c.failMsg
	}
	g, err := release.ParseGraph(data)
	if err != nil {
		c.failReason, c.failMsg = "ResponseInvalid", fmt.Sprintf("Unable to retrieve available updates: %v", err)
		return c.graph, c.failReason, c.failMsg
	}
	c.graph, c.failReason, c.failMsg = g, "", ""
	return g, "", ""
}
