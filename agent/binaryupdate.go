package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/version"
	"github.com/outpost-edge/outpost/selfupdate"
)

// The agent's half of a release's binary update (SPEC UPD-6), as the
// servers do theirs: the cluster version controller sets the node's
// AnnotationAgentBinary to a version and the digest of its platform's
// binary; the agent downloads that binary from the API, stages it by
// digest in its self-update directory, begins a trial and exits, and
// systemd starts the new binary. The pods run on meanwhile (the unit's
// KillMode=process leaves them, as any agent restart does). The new
// binary marks itself good once the control plane holds its node Ready;
// one that exits at start, or is not healthy by the deadline, is rolled
// back by the good binary's check before the next start, and the failure
// is reported on the Node.

// agentTrialTimeout is how long a new agent binary has to be healthy.
const agentTrialTimeout = 3 * time.Minute

// agentBinaryRetry is how soon a failed download is tried again.
const agentBinaryRetry = 30 * time.Second

// binaryState is the binary's state as the agent found it at start,
// registered with its Node.
type binaryState struct {
	state, failure string
	trial          *selfupdate.Trial
}

// readBinary finds the binary's state at start.
func (a *Agent) readBinary() binaryState {
	dir := a.cfg.BinaryDir
	if dir == "" {
		return binaryState{state: api.SelfUpdateUnsupported + ": started without --binary-dir"}
	}
	st, err := selfupdate.Read(dir)
	if err == nil {
		err = selfupdate.Running(dir)
	}
	if err != nil {
		a.log.Warn("this agent cannot replace its binary", "reason", err)
		return binaryState{state: api.SelfUpdateUnsupported + ": " + err.Error()}
	}
	b := binaryState{state: api.SelfUpdateReady, failure: failureNote(st.Failure)}
	if st.Trial != nil && st.Current == st.Trial.Digest {
		b.state, b.trial = api.SelfUpdateTrial, st.Trial
	}
	return b
}

func failureNote(f *selfupdate.Failure) string {
	if f == nil {
		return ""
	}
	return f.Version + ": " + f.Reason
}

func (a *Agent) binaryUpdateLoop(ctx context.Context) {
	dir := a.cfg.BinaryDir
	start := a.bin.Load()
	if start == nil || strings.HasPrefix(start.state, api.SelfUpdateUnsupported) {
		return
	}
	if t := start.trial; t != nil {
		if !a.confirmBinary(ctx, t) {
			return
		}
		st, _ := selfupdate.Read(dir)
		a.reportBinary(ctx, api.SelfUpdateReady, st.Failure)
	}

	poke := make(chan struct{}, 1)
	var want string
	a.wg.Go(func() {
		a.watchOwnNode(ctx, ownNodeHandler{see: func(n *api.Node, _ bool) { a.setWanted(&want, n, poke) }})
	})
	for {
		select {
		case <-ctx.Done():
			return
		case <-poke:
		}
		a.wantMu.Lock()
		w := want
		a.wantMu.Unlock()
		f := strings.Fields(w)
		if len(f) < 2 || f[0] == version.Version {
			continue
		}
		if st, err := selfupdate.Read(dir); err == nil && st.Failure != nil && st.Failure.Version == f[0] {
			continue // rolled back once: reported; no retry loop
		}
		if err := a.stageBinary(ctx, f[0], f[1]); err != nil {
			a.log.Error("binary update", "version", f[0], "err", err)
			a.reportBinary(ctx, api.SelfUpdateReady+"; "+f[0]+" not staged: "+err.Error(), nil)
			select {
			case <-ctx.Done():
				return
			case <-time.After(agentBinaryRetry):
			}
			select {
			case poke <- struct{}{}:
			default:
			}
			continue
		}
		a.log.Info("new binary staged as a trial: restarting on it; the pods run on", "version", f[0])
		a.restartForUpdate("binary update to " + f[0])
		return
	}
}

// setWanted records the binary the node's annotation names, and wakes
// the loop when it changed.
func (a *Agent) setWanted(want *string, n *api.Node, poke chan struct{}) {
	a.wantMu.Lock()
	changed := *want != n.Annotations[api.AnnotationAgentBinary]
	*want = n.Annotations[api.AnnotationAgentBinary]
	a.wantMu.Unlock()
	if changed {
		select {
		case poke <- struct{}{}:
		default:
		}
	}
}

// stageBinary downloads the binary by digest and makes it the trial.
func (a *Agent) stageBinary(ctx context.Context, v, digest string) error {
	if st, err := selfupdate.Read(a.cfg.BinaryDir); err == nil && st.Current == digest {
		// Already running it, yet it says another version: restarting
		// on it again would loop.
		return fmt.Errorf("this agent runs the release's binary %s already, and it reports version %s, not %s: the release's binary is mislabelled", digest, version.Version, v)
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	rc, err := a.cl.Binary(dctx, digest)
	if err != nil {
		return fmt.Errorf("download %s: %w", digest, err)
	}
	defer rc.Close()
	if err := selfupdate.Stage(a.cfg.BinaryDir, rc, digest); err != nil {
		return err
	}
	now := time.Now()
	return selfupdate.Begin(a.cfg.BinaryDir, selfupdate.Trial{Version: v, Digest: digest, FromVersion: version.Version, Deadline: now.Add(agentTrialTimeout)}, now)
}

// confirmBinary waits until the control plane holds this node Ready with
// this process in contact, and marks the binary good; not by the
// deadline, it rolls back and restarts. It reports whether to go on.
func (a *Agent) confirmBinary(ctx context.Context, t *selfupdate.Trial) bool {
	dctx, cancel := context.WithDeadline(ctx, t.Deadline)
	defer cancel()
	why := errors.New("no contact with the control plane yet")
	for {
		if a.online.Load() {
			why = a.nodeReady(dctx)
			if why == nil {
				if err := selfupdate.MarkGood(a.cfg.BinaryDir); err != nil {
					a.log.Error("marking the binary good", "err", err)
					return false
				}
				a.log.Info("new binary healthy: marked good", "version", t.Version)
				return true
			}
		}
		select {
		case <-dctx.Done():
			if ctx.Err() == nil {
				reason := fmt.Sprintf("outpost %s (%s) was not healthy by %s: %v", t.Version, t.Digest, t.Deadline.Format(time.RFC3339), why)
				if err := selfupdate.Abort(a.cfg.BinaryDir, reason, time.Now()); err != nil {
					a.log.Error("rolling back the binary", "err", err)
				}
				a.restartForUpdate("roll back: " + reason)
			}
			return false
		case <-time.After(time.Second):
		}
	}
}

// nodeReady is nil when the control plane's view of the node is Ready.
func (a *Agent) nodeReady(ctx context.Context) error {
	obj, err := a.cl.Get(ctx, nodesResource, "", a.cfg.NodeName, client.GetOptions{})
	if err != nil {
		return err
	}
	n, ok := obj.(*api.Node)
	if !ok {
		return fmt.Errorf("%w: node is a %T", ErrBadReply, obj)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == api.NodeReady {
			if c.Status == api.ConditionTrue {
				return nil
			}
			return fmt.Errorf("node Ready=%s: %s", c.Status, c.Message)
		}
	}
	return errors.New("node has no Ready condition yet")
}

// reportBinary writes the binary's state, and the last roll back, on the
// node (retrying until the node exists and the write goes through).
func (a *Agent) reportBinary(ctx context.Context, state string, f *selfupdate.Failure) {
	failure := failureNote(f)
	if !strings.Contains(state, ";") {
		// What a later registration writes too.
		a.bin.Store(&binaryState{state: state, failure: failure})
	}
	for {
		err := osCluster{a}.UpdateNode(ctx, func(n *api.Node) {
			n.Annotations[api.AnnotationAgentBinaryState] = state
			if failure != "" {
				n.Annotations[api.AnnotationAgentBinaryFailure] = failure
			} else {
				delete(n.Annotations, api.AnnotationAgentBinaryFailure)
			}
		})
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
}

// restartForUpdate ends Run so the process exits and systemd starts it
// again (on the new binary, or the good one after a roll back).
func (a *Agent) restartForUpdate(why string) {
	select {
	case a.restart <- why:
	default:
	}
}
