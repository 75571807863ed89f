package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controllers"
	"github.com/outpost-edge/outpost/controlplane/release"
	"github.com/outpost-edge/outpost/controlplane/version"
	"github.com/outpost-edge/outpost/raftstore"
	"github.com/outpost-edge/outpost/selfupdate"
)

// The server's half of updating the control plane's binary (SPEC UPD-6).
// The leader's cluster version controller names one server at a time in
// ClusterVersion status.controlPlane; the named server fetches the
// release, verifies it against the cluster's trusted keys, stages its
// platform's binary by digest, swaps it in as a trial and exits, and
// systemd starts it again on the new binary. The new binary marks itself
// good once it is a caught-up voter; if it exits at start or is not
// healthy by the trial's deadline, the good binary rolls it back (the
// unit's ExecStartPre) and the failure is reported in the server's raft
// status, where the controller reads it.

// trialTimeout is how long a new binary has to become healthy.
const trialTimeout = 3 * time.Minute

// selfUpdateRetry is how soon a failed fetch or stage is tried again.
const selfUpdateRetry = 30 * time.Second

var clusterVersionsResource = api.ResourceForKind("ClusterVersion")

type selfUpdater struct {
	s    *Server
	dir  string
	info atomic.Pointer[map[string]string]
}

func newSelfUpdater(dir string) *selfUpdater {
	u := &selfUpdater{dir: dir}
	u.setInfo(api.SelfUpdateUnsupported+": started without --binary-dir", nil)
	return u
}

// Info is what the server's raft status says of its binary.
func (u *selfUpdater) Info() map[string]string { return *u.info.Load() }

func (u *selfUpdater) setInfo(state string, f *selfupdate.Failure) {
	m := map[string]string{controllers.InfoSelfUpdate: state}
	if f != nil {
		m[controllers.InfoFailedVersion] = f.Version
		m[controllers.InfoFailure] = f.Reason
	}
	u.info.Store(&m)
}

// run confirms a trial of this binary, then waits to be named.
func (u *selfUpdater) run(ctx context.Context) {
	if u.dir == "" {
		return
	}
	st, err := selfupdate.Read(u.dir)
	if err != nil {
		u.setInfo(api.SelfUpdateUnsupported+": "+err.Error(), nil)
		return
	}
	if err := selfupdate.Running(u.dir); err != nil {
		u.setInfo(api.SelfUpdateUnsupported+": "+err.Error(), st.Failure)
		u.s.log.Warn("this server cannot update its own binary", "reason", err)
		return
	}
	if st.Trial != nil && st.Current == st.Trial.Digest {
		u.setInfo(api.SelfUpdateTrial, st.Failure)
		if !u.confirm(ctx, st.Trial) {
			return
		}
	} else {
		// Ready means a caught-up voter, after any start: the controller
		// names the next server only once the last one is.
		u.setInfo(api.SelfUpdateStarting, st.Failure)
		for u.healthy(ctx) != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
	u.setInfo(api.SelfUpdateReady, st.Failure)
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cp, keys := u.named()
		if cp == nil || cp.Version == version.Version {
			continue
		}
		if st, err := selfupdate.Read(u.dir); err == nil && st.Failure != nil && st.Failure.Version == cp.Version {
			continue // rolled back once: the controller reports it; no retry loop
		}
		// Updating, until the restart: the controller names no other
		// server meanwhile (a retargeted update included).
		st, _ := selfupdate.Read(u.dir)
		u.setInfo(api.SelfUpdateUpdating, st.Failure)
		if err := u.swap(ctx, cp, keys); err != nil {
			u.s.log.Error("self-update", "version", cp.Version, "err", err)
			st, _ := selfupdate.Read(u.dir)
			u.setInfo(api.SelfUpdateReady, st.Failure)
			u.setError(err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(selfUpdateRetry):
			}
			continue
		}
		u.s.log.Info("new binary staged as a trial: restarting on it", "version", cp.Version)
		u.s.restart("update to " + cp.Version)
		return
	}
}

func (u *selfUpdater) setError(err error) {
	m := maps.Clone(u.Info())
	m[controllers.InfoError] = err.Error()
	u.info.Store(&m)
}

// named returns the control plane update naming this server, if any, and
// the cluster's trusted keys.
func (u *selfUpdater) named() (*api.ControlPlaneUpdate, string) {
	obj, _, err := u.s.store.Get(clusterVersionsResource, "", api.ClusterVersionName)
	if err != nil {
		return nil, ""
	}
	cv := obj.(*api.ClusterVersion)
	if cp := cv.Status.ControlPlane; cp != nil && cp.Server == u.s.cfg.ID {
		return cp, cv.Spec.TrustedKeys
	}
	return nil, ""
}

// swap fetches and verifies the release, stages this platform's binary
// and makes it the trial.
func (u *selfUpdater) swap(ctx context.Context, cp *api.ControlPlaneUpdate, trusted string) error {
	keys, err := api.ParseTrustedKeys([]byte(trusted))
	if err != nil {
		return fmt.Errorf("trusted keys: %w", err)
	}
	p, err := release.Fetch(ctx, cp.Image, filepath.Join(u.s.cfg.DataDir, "releases"))
	if err != nil {
		return err
	}
	if err := p.Verify(keys); err != nil {
		return fmt.Errorf("payload %s: %w", cp.Image, err)
	}
	if p.Metadata.Version != cp.Version {
		return fmt.Errorf("payload %s is version %s, not %s", cp.Image, p.Metadata.Version, cp.Version)
	}
	platform := "linux/" + runtime.GOARCH
	r, b, err := p.OpenBinary(platform)
	if err != nil {
		return err
	}
	defer r.Close()
	if st, err := selfupdate.Read(u.dir); err == nil && st.Current == b.Digest {
		// Already running it, yet it says another version: restarting
		// on it again would loop.
		return fmt.Errorf("this server runs the release's binary %s already, and it reports version %s, not %s: the release's binary is mislabelled", b.Digest, version.Version, cp.Version)
	}
	if err := selfupdate.Stage(u.dir, r, b.Digest); err != nil {
		return err
	}
	if now, _ := u.named(); now == nil || now.Version != cp.Version || now.Image != cp.Image {
		return fmt.Errorf("no longer named to move to %s", cp.Version)
	}
	now := time.Now()
	return selfupdate.Begin(u.dir, selfupdate.Trial{Version: cp.Version, Digest: b.Digest, FromVersion: version.Version,
		Deadline: now.Add(trialTimeout)}, now)
}

// confirm waits until this server, on a trial binary, is a caught-up
// voter, and marks the binary good; not by the deadline, it rolls back
// and restarts on the good binary. It reports whether to go on.
func (u *selfUpdater) confirm(ctx context.Context, t *selfupdate.Trial) bool {
	ctx, cancel := context.WithDeadline(ctx, t.Deadline)
	defer cancel()
	for {
		err := u.healthy(ctx)
		if err == nil {
			if err := selfupdate.MarkGood(u.dir); err != nil {
				u.s.log.Error("marking the binary good", "err", err)
				return false
			}
			u.s.log.Info("new binary healthy: marked good", "version", t.Version)
			return true
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				reason := fmt.Sprintf("outpost %s (%s) was not healthy by %s: %v", t.Version, t.Digest, t.Deadline.Format(time.RFC3339), err)
				if aerr := selfupdate.Abort(u.dir, reason, time.Now()); aerr != nil {
					u.s.log.Error("rolling back the binary", "err", aerr)
				}
				u.s.restart("roll back: " + reason)
			}
			return false
		case <-time.After(time.Second):
		}
	}
}

// healthy reports whether this server serves as a voter that has applied
// everything the leader committed when asked.
func (u *selfUpdater) healthy(ctx context.Context) error {
	n := u.s.node
	if _, err := n.WaitForLeader(ctx); err != nil {
		return err
	}
	peers, err := n.Configured()
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(peers, func(p raftstore.Peer) bool { return p.ID == u.s.cfg.ID && p.Suffrage == "Voter" }) {
		return errors.New("not a voter")
	}
	idx, err := n.ReadIndex(ctx)
	if err != nil {
		return err
	}
	return n.WaitApplied(ctx, idx)
}
