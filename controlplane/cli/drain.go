package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

var podResource = api.ResourceForKind("Pod")

// newDrainCommand builds `drain` (also under adm, as in oc): cordon the
// node, then evict its pods through the eviction API, which honours
// their disruption budgets, retrying while a budget refuses, as kubectl
// drain does.
func newDrainCommand(o *options) *cobra.Command {
	var (
		force, ignoreDS, deleteEmptyDir, deleteLocal bool
		grace                                        int64
		timeout, retry                               time.Duration
		podSelector                                  string
	)
	cmd := &cobra.Command{
		Use:   "drain NODE",
		Short: "Cordon a node and evict its pods, as disruption budgets allow",
		Long: `Cordon a node and evict its pods, as disruption budgets allow.

The node is cordoned first, so that nothing new is placed on it. Then every
pod on it is evicted through the eviction API (pods/NAME/eviction): an
eviction that would leave a PodDisruptionBudget with fewer healthy pods
than it needs is refused, and drain tries it again every few seconds until
the budget allows it (the replacement of an earlier pod became ready) or
--timeout passes. An evicted pod stops gracefully on the node; its
controller then places a replacement elsewhere.

Daemon set pods are not evicted (their controller would put them back):
drain stops unless --ignore-daemonsets is given. A pod without a
controller would not come back: --force. A pod with emptyDir data loses it:
--delete-emptydir-data. Run 'outpost uncordon NODE' to let pods back.`,
		Example: `  outpost drain edge-1 --ignore-daemonsets
  outpost adm drain edge-1 --ignore-daemonsets --force --timeout 5m`,
		Args: exactArgs(1, "one NODE to drain, e.g. `outpost drain edge-1`"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if typ, n, ok := strings.Cut(name, "/"); ok {
				if r, err := resourceFor(typ); err != nil || r != nodeResource || n == "" {
					return usagef("only nodes can be drained, not %q", name)
				}
				name = n
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), timeout)
			defer cancel()
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			d := &drainer{cl: cl, out: &lockedWriter{w: stdout}, errOut: &lockedWriter{w: stderr}, retry: retry}
			if grace >= 0 {
				d.grace = &grace
			}
			if err := d.cordon(ctx, name); err != nil {
				return err
			}
			pods, err := d.podsOf(ctx, name, podSelector)
			if err != nil {
				return err
			}
			evict, problems := classify(pods, force, ignoreDS, deleteEmptyDir || deleteLocal, d.errOut)
			if len(problems) > 0 {
				fmt.Fprintf(stderr, "error: unable to drain node %q due to error: %s, continuing command...\n", name, strings.Join(problems, ", "))
				fmt.Fprintf(stderr, "There are pending nodes to be drained:\n %s\n", name)
				return errReported
			}
			// The pods left, on a line of their own (issue 15 item 8):
			// evictions wait on budgets for minutes.
			p := newProgressOn(stderr)
			d.out, d.errOut = p.Above(d.out), p.Above(d.errOut)
			var mu sync.Mutex // the count and its line change together
			left := len(evict)
			d.evicted = func() {
				mu.Lock()
				defer mu.Unlock()
				left--
				p.Update("node/%s: %d of %d pods left to evict", name, left, len(evict))
			}
			if len(evict) > 0 {
				p.Update("node/%s: %d of %d pods left to evict", name, left, len(evict))
			}
			err = d.evictAll(ctx, evict)
			p.Done()
			if err != nil {
				if ctx.Err() != nil && errors.Is(context.Cause(ctx), errTimedOut) {
					fmt.Fprintf(stderr, "error: unable to drain node %q: global timeout reached: %s\n", name, timeout)
				} else {
					fmt.Fprintf(stderr, "error: unable to drain node %q: %s\n", name, FormatError(err))
				}
				fmt.Fprintf(stderr, "There are pending nodes to be drained:\n %s\n", name)
				return errReported
			}
			fmt.Fprintf(stdout, "%s drained\n", refName(nodeResource, name))
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&force, "force", false, "also delete pods that no controller manages (they will not come back)")
	f.BoolVar(&ignoreDS, "ignore-daemonsets", false, "leave daemon set pods where they are instead of stopping")
	f.BoolVar(&deleteEmptyDir, "delete-emptydir-data", false, "also evict pods with emptyDir volumes (their data is lost)")
	f.BoolVar(&deleteLocal, "delete-local-data", false, "the older name of --delete-emptydir-data")
	_ = f.MarkDeprecated("delete-local-data", "use --delete-emptydir-data")
	f.Int64Var(&grace, "grace-period", -1, "seconds each pod gets to stop; negative: the pod's own terminationGracePeriodSeconds")
	f.StringVar(&podSelector, "pod-selector", "", "only evict the pods that match this label selector (app=web,tier!=db)")
	f.DurationVar(&timeout, "timeout", 0, "how long to try before giving up (0: no limit)")
	f.DurationVar(&retry, "eviction-retry-interval", 5*time.Second, "how long to wait before asking again for an eviction a disruption budget refused")
	_ = f.MarkHidden("eviction-retry-interval")
	return cmd
}

// lockedWriter serializes the lines of concurrent evictions.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type drainer struct {
	cl          *client.Client
	out, errOut io.Writer
	grace       *int64
	retry       time.Duration
	// evicted is called as each pod is gone.
	evicted func()
}

// cordon marks the node unschedulable.
func (d *drainer) cordon(ctx context.Context, node string) error {
	_, wrote, err := updateRaw(ctx, d.cl, nodeResource, "", node, func(obj map[string]any) (bool, error) {
		spec := childMap(obj, "spec")
		if cur, _ := spec["unschedulable"].(bool); cur {
			return false, nil
		}
		spec["unschedulable"] = true
		return true, nil
	})
	if err != nil {
		return err
	}
	if wrote {
		fmt.Fprintf(d.out, "%s cordoned\n", refName(nodeResource, node))
	} else {
		fmt.Fprintf(d.out, "%s already cordoned\n", refName(nodeResource, node))
	}
	return nil
}

// podsOf lists the pods bound to node that match selector, in every
// namespace, but those already being deleted.
func (d *drainer) podsOf(ctx context.Context, node, selector string) ([]*api.Pod, error) {
	objs, _, err := d.cl.List(ctx, podResource, "", client.ListOptions{FieldSelector: "spec.nodeName=" + node, LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	var out []*api.Pod
	for _, o := range objs {
		if p := o.(*api.Pod); p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// classify sorts the node's pods as kubectl drain does: what to evict,
// and why others stop the drain.
func classify(pods []*api.Pod, force, ignoreDS, emptyDir bool, warn io.Writer) (evict []*api.Pod, problems []string) {
	var daemons, unmanaged, local []string
	var ignoredDS, forced []string
	for _, p := range pods {
		key := p.Namespace + "/" + p.Name
		finished := api.IsPodPhaseTerminal(p.Status.Phase)
		ref := api.ControllerRef(&p.ObjectMeta)
		switch {
		case finished:
		case ref != nil && ref.Kind == "DaemonSet":
			if ignoreDS {
				ignoredDS = append(ignoredDS, key)
			} else {
				daemons = append(daemons, key)
			}
			continue
		case ref == nil:
			if !force {
				unmanaged = append(unmanaged, key)
				continue
			}
			forced = append(forced, key)
		}
		if !finished && hasEmptyDir(p) && !emptyDir {
			local = append(local, key)
			continue
		}
		evict = append(evict, p)
	}
	if len(daemons) > 0 {
		problems = append(problems, "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): "+strings.Join(daemons, ", "))
	}
	if len(unmanaged) > 0 {
		problems = append(problems, "cannot delete Pods that declare no controller (use --force to override): "+strings.Join(unmanaged, ", "))
	}
	if len(local) > 0 {
		problems = append(problems, "cannot delete Pods with local storage (use --delete-emptydir-data to override): "+strings.Join(local, ", "))
	}
	if len(problems) == 0 {
		if len(ignoredDS) > 0 {
			fmt.Fprintf(warn, "Warning: ignoring DaemonSet-managed Pods: %s\n", strings.Join(ignoredDS, ", "))
		}
		if len(forced) > 0 {
			fmt.Fprintf(warn, "Warning: deleting Pods that declare no controller: %s\n", strings.Join(forced, ", "))
		}
	}
	return evict, problems
}

func hasEmptyDir(p *api.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir != nil {
			return true
		}
	}
	return false
}

// evictAll evicts the pods at once, each retrying while its budget
// refuses, and waits until each is gone.
func (d *drainer) evictAll(ctx context.Context, pods []*api.Pod) error {
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() {
			if errs[i] = d.evictOne(ctx, p); errs[i] == nil && d.evicted != nil {
				d.evicted()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (d *drainer) evictOne(ctx context.Context, p *api.Pod) error {
	fmt.Fprintf(d.out, "evicting pod %s/%s\n", p.Namespace, p.Name)
	for {
		err := d.cl.Evict(ctx, p.Namespace, p.Name, d.grace)
		switch {
		case err == nil:
		case api.IsNotFound(err):
			fmt.Fprintf(d.out, "pod/%s evicted\n", p.Name)
			return nil
		case api.ReasonOf(err) == api.ReasonTooManyRequests:
			fmt.Fprintf(d.errOut, "error when evicting pods/%q -n %q (will retry after %s): %s\n", p.Name, p.Namespace, d.retry, budgetMessage(err))
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(d.retry):
			}
			continue
		default:
			return fmt.Errorf("evicting pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		break
	}
	if err := waitGone(ctx, d.cl, pendingDelete{r: podResource, ns: p.Namespace, name: p.Name, uid: p.UID}); err != nil {
		return fmt.Errorf("waiting for pod %s/%s to go: %w", p.Namespace, p.Name, err)
	}
	fmt.Fprintf(d.out, "pod/%s evicted\n", p.Name)
	return nil
}

// budgetMessage is a 429's message with the budget's cause.
func budgetMessage(err error) string {
	se, ok := errors.AsType[*api.StatusError](err)
	if !ok {
		return err.Error()
	}
	msg := se.Status.Message
	if se.Status.Details != nil {
		for _, c := range se.Status.Details.Causes {
			msg += " " + c.Message + "."
		}
	}
	return msg
}
