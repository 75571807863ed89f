package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	goruntime "runtime"
	"strconv"
	"time"

	"github.com/outpost-edge/outpost/agent/podnet"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/runtime"
)

// How often a worker looks at its running containers when nothing else
// wakes it: a container's exit is seen within this time. With the
// runtime's exit events followed (runtime.ExitWatcher), the event wakes
// the worker and the poll is only a backstop.
const (
	pollRunning = time.Second
	pollWatched = 10 * time.Second
)

// stableRun is how long a container must run for its restart back-off to
// start again from the base, as the kubelet does.
const stableRun = 10 * time.Minute

// Waiting reasons, as the kubelet reports them.
const (
	reasonCreating         = "ContainerCreating"
	reasonErrImagePull     = "ErrImagePull"
	reasonImagePullBackOff = "ImagePullBackOff"
	reasonErrImageNever    = "ErrImageNeverPull"
	reasonCreateError      = "CreateContainerConfigError"
	reasonCreateFailed     = "CreateContainerError"
	reasonRunError         = "RunContainerError"
	reasonCrashLoop        = "CrashLoopBackOff"
	reasonHostPortInUse    = "HostPortInUse"
	reasonPodInitializing  = "PodInitializing"
)

// record is what a worker knows of one container of its pod.
type record struct {
	attempt int
	// id is the current attempt's container, "" before the first.
	id string
	// cur and prev are the runtime's view of the current and previous
	// attempts (prev gives lastState).
	cur, prev   *runtime.ContainerStatus
	imageDigest string
	// waitReason/waitMsg say why there is no running attempt.
	waitReason, waitMsg string
	// notBefore holds back the next attempt (back-off); delay is the
	// back-off that the next failure doubles.
	notBefore time.Time
	delay     time.Duration
	// backoff is the wait before the coming restart, for the message.
	backoff time.Duration
	// startAgain holds back asking the runtime again to start a created
	// container whose start failed.
	startAgain time.Time
}

// worker runs one pod: it creates, restarts and stops the pod's
// containers and computes the pod's status.
type worker struct {
	a    *Agent
	uid  string
	pod  *api.Pod // desired; replaced by update
	recs map[string]*record
	// startTime is when this agent first started the pod.
	startTime time.Time
	wake      chan struct{}
	stopping  bool
	// net is the pod's own network, once set up (nil: none, or the
	// host's); netReleased once it was torn down (the pod finished).
	net         *podnet.Network
	netReleased bool
}

func newWorker(a *Agent, pod *api.Pod, existing []runtime.ContainerStatus) *worker {
	w := &worker{a: a, uid: string(pod.UID), pod: pod, recs: map[string]*record{}, wake: make(chan struct{}, 1)}
	if pod.Status.StartTime != nil {
		w.startTime = pod.Status.StartTime.Time
	}
	// Adopt what a previous run of the agent left: the highest attempt of
	// each container is its current one.
	for i := range existing {
		st := &existing[i]
		name := st.Labels[runtime.LabelContainer]
		n, err := strconv.Atoi(st.Labels[runtime.LabelAttempt])
		if name == "" || err != nil {
			continue
		}
		r := w.rec(name)
		// Called under the pods lock (setPod): write the index directly.
		a.pods.byContainer[st.ID] = w.uid
		switch {
		case r.id == "" || n > r.attempt:
			if r.cur != nil {
				r.prev = r.cur
			}
			r.attempt, r.id, r.cur = n, st.ID, st
		case r.prev == nil || n > attemptOf(r.prev):
			r.prev = st
		}
	}
	if w.startTime.IsZero() && len(existing) > 0 {
		w.startTime = a.now()
	}
	return w
}

func attemptOf(st *runtime.ContainerStatus) int {
	n, _ := strconv.Atoi(st.Labels[runtime.LabelAttempt])
	return n
}

func (w *worker) rec(name string) *record {
	r := w.recs[name]
	if r == nil {
		r = &record{delay: w.a.cfg.RestartBackoff}
		w.recs[name] = r
	}
	return r
}

func (w *worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run syncs the pod until ctx ends or the pod is stopped.
func (w *worker) run(ctx context.Context, updates <-chan *api.Pod, stop <-chan time.Duration) {
	w.adoptNetwork(ctx)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case grace := <-stop:
			w.terminate(ctx, grace)
			return
		case p := <-updates:
			w.pod = p
		case <-w.wake:
		case <-timer.C:
		}
		next := w.sync(ctx)
		st := w.status()
		if api.IsPodPhaseTerminal(st.Phase) {
			// A finished pod runs nothing more: its address goes back.
			w.releaseNetwork(ctx)
		}
		w.a.reportPod(w.pod, st)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// sync brings the containers to what the pod asks and returns when to
// look again.
func (w *worker) sync(ctx context.Context) time.Duration {
	next := w.a.pollInterval()
	now := w.a.now()
	// Init containers run one after another, each to success, before the
	// app containers start.
	for i := range w.pod.Spec.InitContainers {
		c := &w.pod.Spec.InitContainers[i]
		r := w.rec(c.Name)
		w.refresh(ctx, r)
		if r.cur != nil && r.cur.State == runtime.StateExited && r.cur.ExitCode == 0 {
			continue
		}
		if d := w.ensure(ctx, c, r, now, true); d < next {
			next = d
		}
		return next
	}
	if w.startTime.IsZero() {
		w.startTime = now
	}
	for i := range w.pod.Spec.Containers {
		c := &w.pod.Spec.Containers[i]
		r := w.rec(c.Name)
		w.refresh(ctx, r)
		if d := w.ensure(ctx, c, r, now, false); d < next {
			next = d
		}
	}
	return next
}

// refresh reads the current attempt's state from the runtime.
func (w *worker) refresh(ctx context.Context, r *record) {
	if r.id == "" {
		return
	}
	st, err := w.a.rt.ContainerStatus(ctx, r.id)
	switch {
	case errors.Is(err, runtime.ErrNotFound):
		// Removed behind our back: start again from a new attempt.
		r.prev, r.cur, r.id = r.cur, nil, ""
	case err != nil:
		w.a.log.Warn("container status", "pod", w.key(), "container", r.id, "err", err)
	default:
		r.cur = &st
	}
}

// ensure starts container c when it has no attempt yet or its last one
// ended and the restart policy asks for another; it returns when to look
// again.
func (w *worker) ensure(ctx context.Context, c *api.Container, r *record, now time.Time, init bool) time.Duration {
	if r.id != "" && r.cur != nil {
		switch r.cur.State {
		case runtime.StateRunning:
			r.waitReason, r.waitMsg = "", ""
			if now.Sub(r.cur.StartedAt) >= stableRun {
				r.delay = w.a.cfg.RestartBackoff
			}
			return w.a.pollInterval()
		case runtime.StateCreated:
			// Created but not started: a previous run of the agent died
			// between the two steps.
			// Not again at once after a failure: every start that
			// fails changes the pod's status, which wakes this worker,
			// so a start that keeps failing spun on the runtime and
			// the log.
			if wait := r.startAgain.Sub(now); wait > 0 {
				return wait
			}
			if err := w.a.rt.StartContainer(ctx, r.id); err != nil {
				w.a.log.Warn("start container", "pod", w.key(), "container", c.Name, "err", err)
				r.startAgain = now.Add(pollRunning)
				return pollRunning
			}
			return 0
		case runtime.StateExited:
			if !w.restarts(r.cur.ExitCode, init) {
				return time.Hour
			}
			if r.notBefore.IsZero() {
				ran := r.cur.FinishedAt.Sub(r.cur.StartedAt)
				if ran >= stableRun {
					r.delay = w.a.cfg.RestartBackoff
				}
				w.a.podEvent(w.pod, c.Name, eventWarning, "BackOff", fmt.Sprintf("Back-off restarting failed container %s in pod %s (exit code %d)", c.Name, w.pod.Name, r.cur.ExitCode))
				// Counted from the exit; from now when the exit is seen late
				// (an agent restart) or its time is unknown.
				r.backoff = r.delay
				r.notBefore = r.cur.FinishedAt.Add(r.delay)
				if r.notBefore.Before(now) {
					r.notBefore = now.Add(r.delay)
				}
				r.delay = min(r.delay*2, w.a.cfg.RestartBackoffMax)
			}
			if now.Before(r.notBefore) {
				if r.cur.Reason == "StartError" || r.cur.Reason == "ContainerCannotRun" {
					r.waitReason = reasonRunError
				} else {
					r.waitReason = reasonCrashLoop
				}
				r.waitMsg = fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", r.backoff.Round(time.Millisecond), c.Name, w.pod.Name)
				return r.notBefore.Sub(now)
			}
		default:
			return w.a.pollInterval()
		}
	} else if r.id == "" && !r.notBefore.IsZero() && now.Before(r.notBefore) {
		return r.notBefore.Sub(now)
	}
	return w.start(ctx, c, r, now)
}

// restarts reports whether a container that exited with code is started
// again under the pod's restart policy (init containers: until success,
// unless Never).
func (w *worker) restarts(code int32, init bool) bool {
	switch w.pod.Spec.RestartPolicy {
	case api.RestartPolicyNever:
		return false
	case api.RestartPolicyOnFailure:
		return code != 0
	}
	if init {
		return code != 0
	}
	return true
}

// start makes and starts the next attempt of c.
func (w *worker) start(ctx context.Context, c *api.Container, r *record, now time.Time) time.Duration {
	fail := func(reason, msg string) time.Duration {
		if reason != reasonCreating {
			w.a.podEvent(w.pod, c.Name, eventWarning, "Failed", reason+": "+msg)
		}
		r.waitReason, r.waitMsg = reason, msg
		r.notBefore = now.Add(r.delay)
		r.delay = min(r.delay*2, w.a.cfg.RestartBackoffMax)
		w.a.log.Info("container not started", "pod", w.key(), "container", c.Name, "reason", reason, "message", msg)
		return r.notBefore.Sub(now)
	}
	prevReason := r.waitReason
	r.waitReason, r.waitMsg = reasonCreating, ""
	img, err := w.a.rt.EnsureImage(ctx, c.Image, pullPolicy(c), w.a.registryAuth())
	if err != nil {
		switch {
		case errors.Is(err, runtime.ErrImageNeverPull):
			return fail(reasonErrImageNever, err.Error())
		case errors.Is(err, runtime.ErrUnavailable):
			return fail(reasonCreating, err.Error())
		}
		// A pull that failed again: the kubelet then says it backs off.
		if prevReason == reasonErrImagePull || prevReason == reasonImagePullBackOff {
			return fail(reasonImagePullBackOff, err.Error())
		}
		return fail(reasonErrImagePull, err.Error())
	}
	r.imageDigest = img.Digest
	if port, proto, busy := hostPortBusy(c, w.a.ownNetwork(w.pod)); busy {
		return fail(reasonHostPortInUse, fmt.Sprintf("host port %d/%s is already in use on node %s", port, proto, w.a.cfg.NodeName))
	}
	attempt := 0
	if r.id != "" {
		attempt = r.attempt + 1
	}
	ref := c.Image
	spec, err := containerSpec(w.pod, c, attempt, ref)
	if err != nil {
		return fail(reasonCreateError, err.Error())
	}
	// The start slot is taken before the pod's network is set up: the
	// plugins' processes are CPU of the start like the runtime's, and a
	// burst of pods all in their network setup at once would share the
	// CPU until all are late (issue 16 item 4).
	select {
	case w.a.starts <- struct{}{}:
	case <-ctx.Done():
		return fail(reasonCreating, ctx.Err().Error())
	}
	defer func() { <-w.a.starts }()
	if w.a.ownNetwork(w.pod) {
		if w.net == nil {
			n, err := w.a.setupPodNetwork(ctx, w.pod)
			if err != nil {
				w.a.podEvent(w.pod, "", eventWarning, "FailedCreatePodSandBox", "Failed to set up the pod's network: "+err.Error())
				return fail(reasonCreating, "setting up the pod's network: "+err.Error())
			}
			w.net = &n
		}
		spec.NetNS, spec.Hostname = w.net.NetNS, podHostname(w.pod)
	}
	var podIP netip.Addr
	if w.net != nil && len(w.net.IPs) > 0 {
		podIP = w.net.IPs[0]
	}
	if spec.ResolvConf, spec.HostsFile, err = w.a.podFiles(w.pod, podIP); err != nil {
		return fail(reasonCreateError, err.Error())
	}
	// Keep one finished attempt (for lastState and logs --previous);
	// older ones go.
	if r.prev != nil {
		if err := w.a.rt.RemoveContainer(ctx, r.prev.ID); err != nil && !errors.Is(err, runtime.ErrNotFound) {
			w.a.log.Warn("remove old container", "pod", w.key(), "container", r.prev.ID, "err", err)
		}
	}
	// A container of this attempt may exist from an agent that died
	// before it could record it.
	_ = w.a.rt.RemoveContainer(ctx, spec.ID)
	if err := w.a.rt.CreateContainer(ctx, spec); err != nil {
		return fail(reasonCreateFailed, err.Error())
	}
	r.prev, r.cur = r.cur, nil
	r.id, r.attempt = spec.ID, attempt
	w.a.trackContainer(spec.ID, w.uid)
	r.notBefore = time.Time{}
	w.a.podEvent(w.pod, c.Name, eventNormal, "Created", "Created container "+c.Name)
	if err := w.a.rt.StartContainer(ctx, spec.ID); err != nil {
		r.startAgain = now.Add(pollRunning)
		w.a.log.Info("container did not start", "pod", w.key(), "container", c.Name, "err", err)
		w.a.podEvent(w.pod, c.Name, eventWarning, "Failed", "Error: "+err.Error())
	} else {
		w.a.podEvent(w.pod, c.Name, eventNormal, "Started", "Started container "+c.Name)
	}
	r.waitReason, r.waitMsg = "", ""
	w.refresh(ctx, r)
	return 0
}

// parallelStarts is how many containers are created and started at once:
// twice the CPUs, so that the CPU stays busy while some wait on the disk
// or on containerd, and at least 4.
func parallelStarts() int { return max(4, 2*goruntime.NumCPU()) }

// hostPortBusy reports a host port of c that another process holds. A
// pod in the host's network binds every declared port there; one with a
// network of its own (ownNet) only its hostPorts.
func hostPortBusy(c *api.Container, ownNet bool) (int32, string, bool) {
	for _, p := range c.Ports {
		port := p.HostPort
		if port == 0 && !ownNet {
			port = p.ContainerPort
		}
		if port == 0 {
			continue
		}
		proto := p.Protocol
		if proto == "" {
			proto = "TCP"
		}
		addr := net.JoinHostPort(p.HostIP, strconv.Itoa(int(port)))
		switch proto {
		case "UDP":
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				return port, proto, true
			}
			_ = pc.Close()
		default:
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return port, proto, true
			}
			_ = ln.Close()
		}
	}
	return 0, "", false
}

// terminate stops every container of the pod, giving each grace (the
// pod's own grace period when negative), and removes them.
func (w *worker) terminate(ctx context.Context, grace time.Duration) {
	w.a.stopContainers(ctx, w.pod, grace)
	w.releaseNetwork(ctx)
	w.a.removePodFiles(w.uid)
}

// podGrace is the grace period the pod's own spec asks for.
func podGrace(p *api.Pod) time.Duration {
	if g := p.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return DefaultTerminateWait
}

// stopContainers stops every container of pod (SIGTERM, then SIGKILL
// after grace; the pod's own grace period when negative) and removes
// them. The containers are found by the pod's UID label, so it also stops
// what a previous run of the agent started.
func (a *Agent) stopContainers(ctx context.Context, pod *api.Pod, grace time.Duration) {
	if grace < 0 {
		grace = podGrace(pod)
	}
	key := pod.Namespace + "/" + pod.Name
	// Only the pod's: stopping every pod of a node one by one would
	// otherwise read every container once per pod.
	cs, err := a.rt.PodContainers(ctx, string(pod.UID))
	if err != nil {
		a.log.Warn("list containers to stop a pod", "pod", key, "err", err)
	}
	for _, st := range cs {
		if st.State == runtime.StateRunning || st.State == runtime.StateCreated {
			a.podEvent(pod, st.Labels[runtime.LabelContainer], eventNormal, "Killing", fmt.Sprintf("Stopping container %s (grace period %s)", st.Labels[runtime.LabelContainer], grace))
		}
		a.stopAndRemove(ctx, st, grace, "pod", key)
	}
	a.log.Info("pod stopped", "pod", key, "grace", grace)
}

// stopAndRemove stops container st if it runs or was created (SIGTERM,
// then SIGKILL after grace) and removes it; failures are logged with
// logArgs, and a container already gone is not one.
func (a *Agent) stopAndRemove(ctx context.Context, st runtime.ContainerStatus, grace time.Duration, logArgs ...any) {
	if st.State == runtime.StateRunning || st.State == runtime.StateCreated {
		if err := a.rt.StopContainer(ctx, st.ID, grace); err != nil {
			a.log.Warn("stop container", append(logArgs, "container", st.ID, "err", err)...)
		}
	}
	if err := a.rt.RemoveContainer(ctx, st.ID); err != nil && !errors.Is(err, runtime.ErrNotFound) {
		a.log.Warn("remove container", append(logArgs, "container", st.ID, "err", err)...)
	}
}

func (w *worker) key() string { return w.pod.Namespace + "/" + w.pod.Name }
