package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/osupdate"
)

// The agent's side of a pool's rolling update (SPEC UPD-8): it looks at
// its Node's desiredConfig and lets osupdate take the host there. The
// update's record lives in the agent's state file, so it survives the
// reboot it asks for and a kill at any step.

var (
	keyOSUpdate                   = []byte("osupdate")
	machineConfigsResource        = api.ResourceForKind("MachineConfig")
	machineConfigurationsResource = api.ResourceForKind("MachineConfiguration")
	defaultOSUpdateInterval       = 30 * time.Second
)

// osJournal keeps osupdate's record in the state file's meta bucket;
// bbolt syncs before Save returns.
type osJournal struct{ s *state }

func (j osJournal) Load() (osupdate.Record, error) {
	var rec osupdate.Record
	err := j.s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMeta).Get(keyOSUpdate)
		if b == nil {
			return nil
		}
		return json.Unmarshal(b, &rec)
	})
	return rec, err
}

func (j osJournal) Save(rec osupdate.Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return j.s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyOSUpdate, b) })
}

// osCluster is osupdate's view of the control plane, through the node's
// own credential (NodeRestriction lets it cordon itself for an assigned
// update, and lift only that cordon).
type osCluster struct{ a *Agent }

func (c osCluster) Node(ctx context.Context) (*api.Node, error) {
	obj, err := c.a.cl.Get(ctx, nodesResource, "", c.a.cfg.NodeName, client.GetOptions{})
	if err != nil {
		return nil, err
	}
	n, ok := obj.(*api.Node)
	if !ok {
		return nil, fmt.Errorf("%w: node is a %T", ErrBadReply, obj)
	}
	return n, nil
}

func (c osCluster) UpdateNode(ctx context.Context, fn func(*api.Node)) error {
	for attempt := 0; ; attempt++ {
		// The first try writes over the Node the watch delivered last,
		// without a read (a pool of a thousand nodes rolls out the faster
		// for it); a conflict reads it afresh.
		n, err := c.watched()
		if n == nil || attempt > 0 {
			n, err = c.Node(ctx)
		}
		if err != nil {
			return err
		}
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		fn(n)
		obj, _, err := c.a.cl.Update(ctx, n)
		if stored, ok := obj.(*api.Node); ok && err == nil {
			// The next write starts from this one, though the watch
			// has not delivered it yet.
			c.a.osNode.See(stored)
		}
		if err == nil || !api.IsConflict(err) || attempt >= 5 {
			return err
		}
	}
}

// watched is a private copy of the Node the update loop last saw (nil
// before the first).
func (c osCluster) watched() (*api.Node, error) {
	n, ok, err := c.a.osNode.Copy()
	if !ok {
		return nil, err
	}
	return n, nil
}

func (c osCluster) MachineConfig(ctx context.Context, name string) (*api.MachineConfig, error) {
	obj, err := c.a.cl.Get(ctx, machineConfigsResource, "", name, client.GetOptions{})
	if err != nil {
		return nil, err
	}
	mc, ok := obj.(*api.MachineConfig)
	if !ok {
		return nil, fmt.Errorf("%w: machine config is a %T", ErrBadReply, obj)
	}
	return mc, nil
}

func (c osCluster) DisruptionPolicy(ctx context.Context) (*api.MachineConfiguration, error) {
	obj, err := c.a.cl.Get(ctx, machineConfigurationsResource, "", api.MachineConfigurationName, client.GetOptions{})
	if api.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	mc, ok := obj.(*api.MachineConfiguration)
	if !ok {
		return nil, fmt.Errorf("%w: machine configuration is a %T", ErrBadReply, obj)
	}
	return mc, nil
}

// drained are the pods an update's drain evicts: not daemon set pods
// (their controller tolerates the cordon and would put them back), not
// those already done.
func drained(p *api.Pod) bool {
	if api.IsPodPhaseTerminal(p.Status.Phase) {
		return false
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" && o.Controller != nil && *o.Controller {
			return false
		}
	}
	return true
}

func (c osCluster) podsOnNode(ctx context.Context) ([]*api.Pod, error) {
	objs, _, err := c.a.cl.List(ctx, podsResource, "", client.ListOptions{FieldSelector: "spec.nodeName=" + c.a.cfg.NodeName})
	if err != nil {
		return nil, err
	}
	var out []*api.Pod
	for _, o := range objs {
		if p, ok := o.(*api.Pod); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// Drain evicts the node's pods through the eviction API (their budgets
// decide; a refusal is tried again) and waits until they are gone.
func (c osCluster) Drain(ctx context.Context) error {
	backoff := time.Second
	for {
		pods, err := c.podsOnNode(ctx)
		if err != nil {
			return fmt.Errorf("list the node's pods: %w", err)
		}
		var left, refused []string
		for _, p := range pods {
			if !drained(p) {
				continue
			}
			left = append(left, p.Namespace+"/"+p.Name)
			if p.DeletionTimestamp != nil {
				continue // evicted, stopping
			}
			if err := c.a.cl.Evict(ctx, p.Namespace, p.Name, nil); err != nil && !api.IsNotFound(err) {
				refused = append(refused, fmt.Sprintf("%s/%s: %v", p.Namespace, p.Name, err))
			}
		}
		if len(left) == 0 {
			return nil
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			if len(refused) > 0 {
				return fmt.Errorf("%d pods not evicted: %s", len(refused), strings.Join(refused, "; "))
			}
			return fmt.Errorf("%d pods still stopping: %s", len(left), strings.Join(left, ", "))
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// PodsRunning: every pod bound to the node that is not done or being
// deleted runs again.
func (c osCluster) PodsRunning(ctx context.Context) error {
	pods, err := c.podsOnNode(ctx)
	if err != nil {
		return err
	}
	var notRunning []string
	for _, p := range pods {
		if p.DeletionTimestamp != nil || api.IsPodPhaseTerminal(p.Status.Phase) {
			continue
		}
		if p.Status.Phase != api.PodRunning {
			notRunning = append(notRunning, fmt.Sprintf("%s/%s (%s)", p.Namespace, p.Name, p.Status.Phase))
		}
	}
	slices.Sort(notRunning)
	if len(notRunning) > 0 {
		return fmt.Errorf("not running: %s", strings.Join(notRunning, ", "))
	}
	return nil
}

// osUpdateLoop runs the updater: at start (an update a reboot
// interrupted goes on), then every OSUpdateInterval, sooner when a step
// asks to be retried.
func (a *Agent) osUpdateLoop(ctx context.Context, u *osupdate.Updater) {
	interval := a.osUpdateInterval()
	// A watch of the node's own object wakes the loop when its pool gives
	// it a config (or anything else of it changes): the update starts at
	// once rather than at the next look.
	poke := make(chan struct{}, 1)
	wake := func() {
		select {
		case poke <- struct{}{}:
		default:
		}
	}
	var desired string
	// Ends with ctx; a.wg holds this loop, so adding to it here is safe.
	a.wg.Go(func() {
		a.watchOwnNode(ctx, ownNodeHandler{
			see: func(n *api.Node, listed bool) {
				a.osNode.See(n)
				if !listed && n.Annotations[api.AnnotationDesiredConfig] != desired {
					desired = n.Annotations[api.AnnotationDesiredConfig]
					wake()
				}
			},
			listed: wake,
			gone:   a.osNode.Forget,
		})
	})
	for {
		after, err := u.Sync(ctx)
		if err != nil && ctx.Err() == nil {
			a.log.Warn("config update", "error", err)
		}
		wait := interval
		if after > 0 {
			wait = max(after, interval)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-poke:
			t.Stop()
		}
	}
}

func (a *Agent) osUpdateInterval() time.Duration {
	if a.cfg.OSUpdateInterval > 0 {
		return a.cfg.OSUpdateInterval
	}
	return defaultOSUpdateInterval
}

// newUpdater makes the updater from the agent's config, or nil when the
// host takes no config updates.
func (a *Agent) newUpdater() (*osupdate.Updater, error) {
	if a.cfg.OSSystemd == nil {
		return nil, nil
	}
	backend := a.cfg.OSBackend
	if backend == nil {
		backend = osupdate.NoneBackend{}
	}
	u, err := osupdate.New(osupdate.Config{
		Cluster: osCluster{a}, Systemd: a.cfg.OSSystemd, Backend: backend, Journal: osJournal{a.state},
		Root: a.cfg.OSRoot, RunDir: a.cfg.OSRunDir, Logger: a.log.With("component", "osupdate"),
		// A failed step (a drain a budget refuses) waits one look.
		RetryAfter: a.osUpdateInterval(),
		AfterStep:  holdAtSteps(a.log, a.cfg.OSRunDir, os.Getenv(envHoldUpdateSteps)),
	})
	if err != nil {
		return nil, errors.Join(ErrConfig, err)
	}
	return u, nil
}

// envHoldUpdateSteps names update steps (comma-separated, as the journal
// names them: Cordoned, Written...) at which the agent stops, once per
// boot, after journaling the step: the end-to-end tests SIGKILL a real
// agent there (issue 12's kill at each step). Unset in use.
const envHoldUpdateSteps = "OUTPOST_TEST_HOLD_UPDATE_STEPS"

// holdAtSteps is the hook for envHoldUpdateSteps (nil when it is unset).
// A step held once in this boot is marked in runDir and not held again,
// so the agent systemd starts after the kill goes on.
func holdAtSteps(log *slog.Logger, runDir, steps string) func(context.Context, osupdate.Step) {
	if steps == "" {
		return nil
	}
	if runDir == "" {
		runDir = "/run/outpost"
	}
	held := strings.Split(steps, ",")
	return func(ctx context.Context, step osupdate.Step) {
		if !slices.Contains(held, string(step)) {
			return
		}
		mark := filepath.Join(runDir, "test-held-"+string(step))
		if _, err := os.Stat(mark); err == nil {
			return
		}
		if err := os.MkdirAll(runDir, 0o755); err != nil {
			log.Error("test hold", "error", err)
			return
		}
		if err := os.WriteFile(mark, nil, 0o644); err != nil {
			log.Error("test hold", "error", err)
			return
		}
		log.Warn("update held for a test", "step", string(step), "env", envHoldUpdateSteps)
		<-ctx.Done()
	}
}

// ownNodeHandler is what watchOwnNode calls: see with each version of the
// node (listed: from a list, not a change), listed after each list, gone
// when the node is deleted; nil ones are not called.
type ownNodeHandler struct {
	see    func(n *api.Node, listed bool)
	listed func()
	gone   func()
}

// watchOwnNode follows this node's own object through the API until ctx
// ends.
func (a *Agent) watchOwnNode(ctx context.Context, h ownNodeHandler) {
	a.cl.ListWatch(ctx, nodesResource, "", client.ListOptions{FieldSelector: "metadata.name=" + a.cfg.NodeName}, client.ListWatchHandler{
		Reset: func(objs []api.Object) {
			for _, o := range objs {
				if n, ok := o.(*api.Node); ok && n.Name == a.cfg.NodeName && h.see != nil {
					h.see(n, true)
				}
			}
			if h.listed != nil {
				h.listed()
			}
		},
		Event: func(typ string, obj api.Object) {
			n, ok := obj.(*api.Node)
			switch {
			case !ok:
			case typ == client.EventDeleted:
				if h.gone != nil {
					h.gone()
				}
			case h.see != nil:
				h.see(n, false)
			}
		},
	})
}
