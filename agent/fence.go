package agent

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/scheduler/taints"
)

// The agent fences itself (SPEC TNT-9, issue 10 item 6). While it cannot
// reach the control plane it applies the control plane's rule from its
// side: a pod whose toleration of node.kubernetes.io/unreachable runs out
// is stopped, early enough that its replacement cannot have started.
//
// Both sides count from the last heartbeat the control plane
// acknowledged, each on its own monotonic clock, so no wall clock needs
// to agree: the agent from when it sent that heartbeat (before the
// leader received it), the leader from when it received it. The agent
// stops a pod at lastAck + G + T (G the node monitor grace period the
// leader gives with each heartbeat, T the pod's toleration of
// unreachable); the leader removes the pod's object, letting it be
// replaced, no earlier than its own last sign of the node + G + T + the
// pod's grace period + a margin (controllers' taint eviction). The
// agent's clock is CLOCK_BOOTTIME, which counts on across an agent
// restart; after a reboot (a new boot ID) the time before it is not
// known, so pods with a limit are not started until the control plane
// answers.

// fenceCheck is how often the agent looks for pods to fence.
const fenceCheck = 500 * time.Millisecond

// bootClock reads CLOCK_BOOTTIME: monotonic, counting while suspended,
// and shared by every process of this boot.
func bootClock() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		// Not Linux, or not this kernel: the process's monotonic clock,
		// which an agent restart resets (a restart then counts as a
		// reboot would, see loadFence).
		return time.Since(processStart)
	}
	return time.Duration(ts.Nano())
}

var processStart = time.Now()

// readBootID is this boot's ID ("" when unknown).
func readBootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// fenceClock is the agent's half of the rule.
type fenceClock struct {
	now    func() time.Duration
	bootID string

	mu sync.Mutex
	// lastAck is the boot clock when the last heartbeat or status the
	// control plane acknowledged was sent; known says it counts in this
	// boot.
	lastAck time.Duration
	known   bool
	// grace is the node monitor grace period the leader last gave: 0
	// until it does, which fences early rather than late.
	grace time.Duration
	saved time.Duration
	// started is the boot clock when this run of the agent began.
	started time.Duration
}

// loadFence restores the clock from the state file: the same boot keeps
// its last acknowledgement; another boot (or none recorded with pods
// saved) knows nothing until the control plane answers.
func loadFence(st *state, now func() time.Duration, bootID string, hadPods bool) *fenceClock {
	f := &fenceClock{now: now, bootID: bootID, started: now()}
	rec, ok := st.fence()
	switch {
	case ok && rec.BootID == bootID && bootID != "" && rec.LastAck <= f.started:
		f.lastAck, f.known, f.grace = rec.LastAck, true, rec.Grace
	case ok:
		f.grace = rec.Grace // a reboot: the time before it is unknown
	case !hadPods:
		// A new agent: nothing runs that a deadline could concern.
		f.lastAck, f.known = f.started, true
	}
	return f
}

// ack records that the control plane acknowledged what was sent at
// sentAt; grace > 0 is the leader's node monitor grace period. It
// returns the record to save, if one is due (at most one per period).
func (f *fenceClock) ack(sentAt, grace, period time.Duration) (fenceRecord, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.known || sentAt > f.lastAck {
		f.lastAck, f.known = sentAt, true
	}
	changed := grace > 0 && grace != f.grace
	if grace > 0 {
		f.grace = grace
	}
	// A new grace period is saved at once: a restart must not fence by
	// an older one.
	if !changed && f.saved != 0 && f.now()-f.saved < period {
		return fenceRecord{}, false
	}
	f.saved = f.now()
	return fenceRecord{BootID: f.bootID, LastAck: f.lastAck, Grace: f.grace}, true
}

// deadline is when a pod that tolerates unreachable for tol must have
// been stopped, on the boot clock; at once when no acknowledgement of
// this boot is known.
func (f *fenceClock) deadline(tol time.Duration) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.known {
		return 0
	}
	return f.lastAck + f.grace + tol
}

// ackedAfter reports whether the control plane acknowledged something
// sent after t.
func (f *fenceClock) ackedAfter(t time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.known && f.lastAck > t
}

// graceKnown reports whether the leader has given its node monitor grace
// period.
func (f *fenceClock) graceKnown() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.grace > 0
}

func (f *fenceClock) graceNow() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.grace
}

// silentFor is how long ago the last acknowledged heartbeat was sent.
func (f *fenceClock) silentFor() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.known {
		return -1
	}
	return f.now() - f.lastAck
}

// fenced is a pod the agent stopped by its own rule; at is the boot
// clock then. It runs again only once the control plane, after an
// acknowledgement newer than at, still wants it.
type fenced struct {
	pod *api.Pod
	at  time.Duration
}

// acked is called with the boot clock at which an acknowledged request
// was sent: it advances the fence clock and, when the control plane is
// back, looks at the fenced pods again.
func (a *Agent) acked(ctx context.Context, sentAt time.Duration, grace time.Duration) {
	if rec, due := a.fence.ack(sentAt, grace, a.cfg.Heartbeat); due {
		if err := a.state.setFence(rec); err != nil {
			a.log.Warn("state file: fence clock", "err", err)
		}
	}
	a.pods.mu.Lock()
	var back []*api.Pod
	for _, f := range a.pods.fenced {
		if a.fence.ackedAfter(f.at) {
			back = append(back, f.pod)
		}
	}
	a.pods.mu.Unlock()
	for _, p := range back {
		a.wg.Go(func() { a.unfence(ctx, p) })
	}
}

// fenceLoop stops the pods whose deadline passed while the control plane
// could not be reached.
func (a *Agent) fenceLoop(ctx context.Context) {
	t := time.NewTicker(fenceCheck)
	defer t.Stop()
	for {
		a.fenceDue(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// fenceDue fences every desired pod whose deadline has passed.
func (a *Agent) fenceDue(ctx context.Context) {
	now := a.fence.now()
	a.pods.mu.Lock()
	var due []*api.Pod
	for _, p := range a.pods.desired {
		if a.fenceDeadlinePassed(p, now) {
			due = append(due, p)
		}
	}
	a.pods.mu.Unlock()
	for _, p := range due {
		a.fencePod(ctx, p)
	}
}

// fenceDeadlinePassed reports whether p, with its toleration of
// unreachable, must not run at boot clock now.
func (a *Agent) fenceDeadlinePassed(p *api.Pod, now time.Duration) bool {
	tol, forever := taints.UnreachableToleration(p.Spec.Tolerations)
	return !forever && now >= a.fence.deadline(tol)
}

// fencePod stops p by the agent's own rule and keeps it stopped, across
// restarts, until the control plane says what becomes of it.
func (a *Agent) fencePod(ctx context.Context, p *api.Pod) {
	uid := string(p.UID)
	tol, _ := taints.UnreachableToleration(p.Spec.Tolerations)
	silent := a.fence.silentFor()
	why := fmt.Sprintf("no heartbeat acknowledged by the control plane for %s, more than the node monitor grace period and the pod's toleration of unreachable (%s): "+
		"the control plane may replace it now, so its node stops it (TNT-9)", roundOrUnknown(silent), tol)
	if silent < 0 {
		why = "the host restarted while cut off from the control plane, so how long the pod was away is unknown: it is not started again until the control plane is reached (TNT-9)"
	}
	a.log.Warn("cut off from the control plane: stopping a pod whose toleration of unreachable ran out", "pod", p.Namespace+"/"+p.Name,
		"silent_for", roundOrUnknown(silent), "toleration", tol, "node_monitor_grace", a.fence.graceNow())
	if err := a.state.fencePod(p); err != nil {
		a.log.Error("state file: fenced pod", "pod", p.Namespace+"/"+p.Name, "err", err)
	}
	a.pods.mu.Lock()
	a.pods.fenced[uid] = fenced{pod: p, at: a.fence.now()}
	a.pods.mu.Unlock()
	if h := a.dropPod(uid, -1); h == nil {
		// No worker runs it (restored at start): stop what runs.
		a.wg.Go(func() { a.stopContainers(ctx, p, -1) })
	}
	a.podEvent(p, "", eventWarning, "StoppedByNode", "Stopping pod: "+why)
}

func roundOrUnknown(d time.Duration) string {
	if d < 0 {
		return "unknown"
	}
	return d.Round(100 * time.Millisecond).String()
}

// isFenced reports whether the agent holds pod uid stopped.
func (a *Agent) isFenced(uid string) bool {
	a.pods.mu.Lock()
	defer a.pods.mu.Unlock()
	_, ok := a.pods.fenced[uid]
	return ok
}

// unfence runs p, which the agent fenced, again: the control plane has
// acknowledged the node since and still wants p. It first writes p's
// status, conditional on the version read; the control plane's removal
// of a fenced pod is conditional on the version it read, so of the two
// exactly one happens (see controllers' taint eviction).
func (a *Agent) unfence(ctx context.Context, p *api.Pod) {
	uid := string(p.UID)
	a.pods.mu.Lock()
	f, ok := a.pods.fenced[uid]
	if ok {
		f.pod = p
		a.pods.fenced[uid] = f
	}
	a.pods.mu.Unlock()
	if !ok || !a.fence.ackedAfter(f.at) || p.DeletionTimestamp != nil || p.Spec.NodeName != a.cfg.NodeName {
		return
	}
	upd := *p
	upd.Status.Conditions = slices.Clone(p.Status.Conditions)
	now := api.NewTime(time.Now())
	cond := api.PodCondition{Type: api.PodReady, Status: api.ConditionFalse, Reason: "StoppedByNode", LastTransitionTime: now,
		Message: "its node stopped it while cut off from the control plane; starting it again"}
	replaced := false
	for i := range upd.Status.Conditions {
		if upd.Status.Conditions[i].Type == api.PodReady {
			upd.Status.Conditions[i], replaced = cond, true
		}
	}
	if !replaced {
		upd.Status.Conditions = append(upd.Status.Conditions, cond)
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, _, err := a.cl.UpdateStatus(rctx, &upd)
	cancel()
	if err != nil {
		// A conflict or NotFound: a newer version (or the delete) comes
		// through the watch; anything else: the next acknowledgement.
		a.log.Info("fenced pod not started again yet", "pod", p.Namespace+"/"+p.Name, "err", err)
		return
	}
	a.forgetFenced(uid)
	a.log.Info("the control plane still wants a pod its node stopped while cut off: starting it again", "pod", p.Namespace+"/"+p.Name)
	a.podEvent(p, "", eventNormal, "StartedByNode", "Starting pod again: the control plane, reachable again, still wants it here")
	a.setPod(ctx, p, nil, false)
}

// forgetFenced drops uid from the fenced pods.
func (a *Agent) forgetFenced(uid string) {
	a.pods.mu.Lock()
	_, ok := a.pods.fenced[uid]
	delete(a.pods.fenced, uid)
	a.pods.mu.Unlock()
	if ok {
		if err := a.state.unfencePod(uid); err != nil {
			a.log.Warn("state file: unfence pod", "uid", uid, "err", err)
		}
	}
}
