package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// Names the deployment controller writes, as Kubernetes' does: the
// revision of each ReplicaSet, the label that tells the pods of one
// template from another's, and the change cause users may record.
const (
	revisionAnnotation    = "deployment.kubernetes.io/revision"
	templateHashLabel     = "pod-template-hash"
	changeCauseAnnotation = "kubernetes.io/change-cause"
)

var (
	deploymentResource = api.ResourceForKind("Deployment")
	daemonSetResource  = api.ResourceForKind("DaemonSet")
	replicaSetResource = api.ResourceForKind("ReplicaSet")
)

func newRolloutCommand(o *options) *cobra.Command {
	rollout := &cobra.Command{
		Use:   "rollout",
		Short: "Follow, list, undo, restart, pause and resume the rollouts of deployments and daemon sets",
		Long: "A deployment rolls a new pod template out through a new ReplicaSet and keeps the\n" +
			"earlier ones, scaled to zero, as its revision history; rollout follows that process.",
	}
	rollout.AddCommand(newRolloutStatusCommand(o), newRolloutUndoCommand(o), newRolloutHistoryCommand(o), newRolloutRestartCommand(o),
		newRolloutPauseCommand(o, true), newRolloutPauseCommand(o, false))
	return rollout
}

// oneTarget reads the single `TYPE/NAME` or `TYPE NAME` the rollout verbs
// take and checks its type is one of kinds.
func oneTarget(args []string, verb string, kinds ...string) (*api.Resource, string, error) {
	targets, err := parseTargets(args)
	if err != nil {
		return nil, "", err
	}
	if len(targets) != 1 || len(targets[0].names) != 1 {
		return nil, "", usagef("expected exactly one object, e.g. `deployment/web`")
	}
	t := targets[0]
	if !slices.Contains(kinds, t.r.Kind) {
		if t.r == daemonSetResource && (verb == "history" || verb == "undo") {
			return nil, "", usagef("rollout %s is not available for daemonsets: outpost's daemon set controller keeps no "+
				"ControllerRevisions, so there are no earlier templates to list or go back to; re-apply the earlier manifest instead", verb)
		}
		return nil, "", usagef("rollout %s is not available for %s", verb, t.r.Plural)
	}
	return t.r, t.names[0], nil
}

func newRolloutStatusCommand(o *options) *cobra.Command {
	var (
		watch   bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "status (deployment|daemonset)/NAME",
		Short: "Follow a rollout until it is done",
		Long: "status prints the progress of the latest rollout and, with --watch (the default), follows\n" +
			"it until every replica runs the new template and is available. It fails if the\n" +
			"deployment's controller gave up (its progress deadline passed) or --timeout runs out.",
		Example: `  outpost rollout status deployment/web
  outpost rollout status deploy web -n shop --timeout=5m
  outpost rollout status daemonset/agent --watch=false`,
		Args: minArgs(1, "a deployment or daemon set, e.g. `outpost rollout status deployment/web`"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, name, err := oneTarget(args, "status", "Deployment", "DaemonSet")
			if err != nil {
				return err
			}
			if timeout < 0 {
				return usagef("--timeout must not be negative")
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			return followRollout(cmd.Context(), cl, r, cl.Namespace(), name, watch, timeout, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&watch, "watch", "w", true, "follow the rollout until it ends; false prints the state once")
	f.DurationVar(&timeout, "timeout", 0, "give up after this long (e.g. 5m); 0 waits for ever")
	return cmd
}

// rolloutStatus says where the latest rollout of obj stands, in kubectl's
// words, and whether it is done. The controller must have seen the
// latest spec (observedGeneration) before its counts mean anything.
func rolloutStatus(obj api.Object) (string, bool, error) {
	switch o := obj.(type) {
	case *api.Deployment:
		st := o.Status
		if o.Generation > st.ObservedGeneration {
			return "Waiting for deployment spec update to be observed...", false, nil
		}
		for _, c := range st.Conditions {
			if c.Type == "Progressing" && c.Reason == "ProgressDeadlineExceeded" {
				return "", false, fmt.Errorf("deployment %q %w", o.Name, errProgressDeadline)
			}
		}
		want := replicas(o.Spec.Replicas)
		switch {
		case st.UpdatedReplicas < want:
			return fmt.Sprintf("Waiting for deployment %q rollout to finish: %d out of %d new replicas have been updated...", o.Name, st.UpdatedReplicas, want), false, nil
		case st.Replicas > st.UpdatedReplicas:
			return fmt.Sprintf("Waiting for deployment %q rollout to finish: %d old replicas are pending termination...", o.Name, st.Replicas-st.UpdatedReplicas), false, nil
		case st.AvailableReplicas < st.UpdatedReplicas:
			return fmt.Sprintf("Waiting for deployment %q rollout to finish: %d of %d updated replicas are available...", o.Name, st.AvailableReplicas, st.UpdatedReplicas), false, nil
		}
		return fmt.Sprintf("deployment %q successfully rolled out", o.Name), true, nil
	case *api.DaemonSet:
		if t := o.Spec.UpdateStrategy.Type; t != "" && t != "RollingUpdate" {
			return "", false, fmt.Errorf("%w for daemon set %q: it uses the %s update strategy, and status follows RollingUpdate only", errNoStatus, o.Name, t)
		}
		st := o.Status
		if o.Generation > st.ObservedGeneration {
			return "Waiting for daemon set spec update to be observed...", false, nil
		}
		switch {
		case st.UpdatedNumberScheduled < st.DesiredNumberScheduled:
			return fmt.Sprintf("Waiting for daemon set %q rollout to finish: %d out of %d new pods have been updated...", o.Name, st.UpdatedNumberScheduled, st.DesiredNumberScheduled), false, nil
		case st.NumberAvailable < st.DesiredNumberScheduled:
			return fmt.Sprintf("Waiting for daemon set %q rollout to finish: %d of %d updated pods are available...", o.Name, st.NumberAvailable, st.DesiredNumberScheduled), false, nil
		}
		return fmt.Sprintf("daemon set %q successfully rolled out", o.Name), true, nil
	}
	return "", false, fmt.Errorf("%w for %T", errNoStatus, obj)
}

// withTimeout is ctx ending after timeout (none when 0) with errTimedOut
// as its cause; cancel ends it at once, which closes watch requests.
func withTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, timeout, errTimedOut)
}

// followRollout prints the rollout's state, then (with watch) every new
// state the object's watch brings until the rollout is done, fails, or
// the timeout passes. A watch that falls out of the server's window or
// ends reads the object again and goes on.
func followRollout(ctx context.Context, cl *client.Client, r *api.Resource, ns, name string, watch bool, timeout time.Duration, w io.Writer) error {
	// Leaving cancels the watch request, which would otherwise stay open.
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	last := ""
	// report prints a state unless it is the one printed last, and
	// reports whether following is over.
	report := func(obj api.Object) (bool, error) {
		msg, done, err := rolloutStatus(obj)
		if err != nil {
			return true, err
		}
		if msg != last {
			fmt.Fprintln(w, msg)
			last = msg
		}
		return done, nil
	}
	ended := func(err error) error {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return err
	}
	read := func() (string, bool, error) {
		obj, err := cl.Get(ctx, r, ns, name, client.GetOptions{Consistent: true})
		if err != nil {
			return "", true, ended(err)
		}
		done, err := report(obj)
		return obj.GetObjectMeta().ResourceVersion, done, err
	}
	rv, done, err := read()
	if done || err != nil || !watch {
		return err
	}
	opts := client.ListOptions{FieldSelector: "metadata.name=" + name}
	for {
		ch, err := cl.Watch(ctx, r, ns, opts, rv)
		if err != nil {
			if ctx.Err() == nil && api.IsGone(err) {
				if rv, done, err = read(); done || err != nil {
					return err
				}
				continue
			}
			return ended(err)
		}
		for ev := range ch {
			switch ev.Type {
			case client.EventError:
				if !api.IsGone(ev.Err) {
					return ended(ev.Err)
				}
				if rv, done, err = read(); done || err != nil {
					return err
				}
			case client.EventBookmark:
				rv = ev.Object.GetObjectMeta().ResourceVersion
			case client.EventDeleted:
				return fmt.Errorf("%s was deleted while its rollout was followed: %w", refName(r, name), api.NewNotFound(r, name))
			default:
				rv = ev.Object.GetObjectMeta().ResourceVersion
				if done, err := report(ev.Object); done || err != nil {
					return err
				}
			}
		}
		// The server ended the stream (its watch timeout, a restart):
		// pause so a failing server is not hammered, then go on.
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(time.Second):
		}
	}
}

// revisioned is one ReplicaSet of a deployment's history, raw (to copy
// its template whole) and decoded (to print it).
type revisioned struct {
	revision int64
	raw      map[string]any
	rs       *api.ReplicaSet
}

// history lists the ReplicaSets a deployment controls (by the uid in
// their controller owner reference, as names and selectors can be
// reused), oldest revision first. ReplicaSets without a readable revision
// annotation are not part of the history.
func history(ctx context.Context, cl *client.Client, ns, uid string) ([]revisioned, error) {
	data, _, err := cl.Do(ctx, http.MethodGet, client.PathFor(replicaSetResource, ns, "", ""), nil, nil)
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("%w: replicasets list: %w", errBadJSON, err)
	}
	var out []revisioned
	for _, item := range list.Items {
		obj, err := client.DecodeObject(replicaSetResource, item)
		if err != nil {
			return nil, err
		}
		rs := obj.(*api.ReplicaSet)
		if !controlledBy(&rs.ObjectMeta, uid) {
			continue
		}
		rev, err := strconv.ParseInt(rs.Annotations[revisionAnnotation], 10, 64)
		if err != nil || rev <= 0 {
			continue
		}
		raw, err := decodeJSONMap(item)
		if err != nil {
			return nil, err
		}
		out = append(out, revisioned{revision: rev, raw: raw, rs: rs})
	}
	slices.SortFunc(out, func(a, b revisioned) int { return cmp.Compare(a.revision, b.revision) })
	return out, nil
}

// controlledBy reports whether m's controller owner reference has uid.
func controlledBy(m *api.ObjectMeta, uid string) bool {
	for _, ref := range m.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			return uid != "" && ref.UID == uid
		}
	}
	return false
}

// withoutHash is a deep copy of a raw pod template without the
// pod-template-hash label, which the controller adds to its ReplicaSets'
// templates and which is not part of the deployment's.
func withoutHash(template any) map[string]any {
	t, _ := deepCopy(template).(map[string]any)
	if t == nil {
		return map[string]any{}
	}
	if labels := nestedMap(t, "metadata", "labels"); labels != nil {
		delete(labels, templateHashLabel)
		if len(labels) == 0 {
			delete(nestedMap(t, "metadata"), "labels")
		}
	}
	return t
}

// pickRevision finds the ReplicaSet to roll back to: revision to, or
// without it (0) the newest revision before the latest one.
func pickRevision(h []revisioned, to int64, name string) (revisioned, error) {
	if to > 0 {
		for _, rv := range h {
			if rv.revision == to {
				return rv, nil
			}
		}
		return revisioned{}, fmt.Errorf("%w %d in the history of deployment %q", errNoRevision, to, name)
	}
	if len(h) < 2 {
		return revisioned{}, fmt.Errorf("%w for deployment %q: there is no earlier revision to go back to", errNoHistory, name)
	}
	return h[len(h)-2], nil
}

func newRolloutUndoCommand(o *options) *cobra.Command {
	var toRevision int64
	cmd := &cobra.Command{
		Use:   "undo deployment/NAME [--to-revision=N]",
		Short: "Roll a deployment back to an earlier revision",
		Long: "undo puts the pod template of an earlier revision (by default the one before the\n" +
			"latest) back into the deployment, which then rolls it out like any change; the\n" +
			"controller reuses that revision's ReplicaSet. See the revisions with `outpost rollout history`.",
		Example: `  outpost rollout undo deployment/web
  outpost rollout undo deploy web --to-revision=2 -n shop`,
		Args: minArgs(1, "a deployment, e.g. `outpost rollout undo deployment/web`"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, name, err := oneTarget(args, "undo", "Deployment")
			if err != nil {
				return err
			}
			if toRevision < 0 {
				return usagef("--to-revision must not be negative")
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			msg, err := undoDeployment(cmd.Context(), cl, cl.Namespace(), name, toRevision)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", refName(r, name), msg)
			return nil
		},
	}
	cmd.Flags().Int64Var(&toRevision, "to-revision", 0, "the revision to roll back to (0: the one before the latest)")
	return cmd
}

// undoDeployment copies the template of the chosen revision's ReplicaSet
// into the deployment with a conditional update, reading the history again
// if the deployment changed meanwhile. It returns the result for the
// line after the object's name.
func undoDeployment(ctx context.Context, cl *client.Client, ns, name string, to int64) (string, error) {
	msg := ""
	_, _, err := updateRaw(ctx, cl, deploymentResource, ns, name, func(obj map[string]any) (bool, error) {
		spec := childMap(obj, "spec")
		if paused, _ := spec["paused"].(bool); paused {
			return false, fmt.Errorf("%w: resume deployment %q first (set spec.paused to false), then undo", errPaused, name)
		}
		uid, _ := nestedMap(obj, "metadata")["uid"].(string)
		h, err := history(ctx, cl, ns, uid)
		if err != nil {
			return false, err
		}
		target, err := pickRevision(h, to, name)
		if err != nil {
			return false, err
		}
		template := withoutHash(nestedMap(target.raw, "spec")["template"])
		if reflect.DeepEqual(template, withoutHash(spec["template"])) {
			msg = fmt.Sprintf("skipped rollback (current template already matches revision %d)", target.revision)
			return false, nil
		}
		spec["template"] = template
		msg = "rolled back"
		return true, nil
	})
	return msg, err
}

func newRolloutHistoryCommand(o *options) *cobra.Command {
	var revision int64
	cmd := &cobra.Command{
		Use:   "history deployment/NAME [--revision=N]",
		Short: "List the revisions of a deployment, or show one",
		Example: `  outpost rollout history deployment/web
  outpost rollout history deploy web --revision=2`,
		Args: minArgs(1, "a deployment, e.g. `outpost rollout history deployment/web`"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, name, err := oneTarget(args, "history", "Deployment")
			if err != nil {
				return err
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			ns := cl.Namespace()
			obj, err := cl.Get(ctx, r, ns, name, client.GetOptions{Consistent: true})
			if err != nil {
				return err
			}
			h, err := history(ctx, cl, ns, obj.GetObjectMeta().UID)
			if err != nil {
				return err
			}
			return printHistory(cmd.OutOrStdout(), refName(r, name), name, h, revision)
		},
	}
	cmd.Flags().Int64Var(&revision, "revision", 0, "show the pod template of this revision")
	return cmd
}

// printHistory writes the revision table, or one revision's template.
func printHistory(w io.Writer, ref, name string, h []revisioned, revision int64) error {
	if revision > 0 {
		rv, err := pickRevision(h, revision, name)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s with revision #%d\n", ref, rv.revision)
		d := &describer{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
		t := rv.rs.Spec.Template
		t.Labels = withoutKey(t.Labels, templateHashLabel)
		d.template(&t)
		return d.tw.Flush()
	}
	if len(h) == 0 {
		fmt.Fprintln(w, "No rollout history found.")
		return nil
	}
	fmt.Fprintln(w, ref)
	rows := make([][]string, 0, len(h))
	for _, rv := range h {
		rows = append(rows, []string{strconv.FormatInt(rv.revision, 10), orNone(rv.rs.Annotations[changeCauseAnnotation])})
	}
	return newTable([]string{"REVISION", "CHANGE-CAUSE"}).print(w, rows)
}

// withoutKey returns m without k, copying only when k is there.
func withoutKey(m map[string]string, k string) map[string]string {
	if _, ok := m[k]; !ok {
		return m
	}
	out := make(map[string]string, len(m)-1)
	for mk, v := range m {
		if mk != k {
			out[mk] = v
		}
	}
	return out
}
