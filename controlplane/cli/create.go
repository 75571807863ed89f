package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

func newCreateCommand(o *options) *cobra.Command {
	var ff fileFlags
	cmd := &cobra.Command{
		Use:   "create -f FILE|DIR|-",
		Short: "Create objects from manifests; an existing object is an error",
		Example: `  outpost create -f pod.yaml
  outpost create namespace edge`,
		Args: exactArgs(0, "no arguments; name the manifests with -f, or use a subcommand such as `create namespace NAME`"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runManifests(cmd, o, ff, "create", func(ctx context.Context, cl *client.Client, m *manifest) (string, error) {
				name, err := createManifest(ctx, cl, m, o.namespace)
				if err != nil {
					return "", fmt.Errorf("error when creating %q: %w", m.source, err)
				}
				return refName(m.r, name) + " created", nil
			})
		},
	}
	addFileFlags(cmd, &ff, "the manifests to create")
	cmd.AddCommand(newCreateDeploymentCommand(o), newCreateServiceCommand(o))
	cmd.AddCommand(&cobra.Command{
		Use:     "namespace NAME",
		Aliases: []string{"ns"},
		Short:   "Create a namespace",
		Example: `  outpost create namespace shop
  outpost create ns lab
  outpost get namespaces`,
		Args: exactArgs(1, "the name of the namespace"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			ns := &api.Namespace{ObjectMeta: api.ObjectMeta{Name: args[0]}}
			if _, _, err := cl.Create(cmd.Context(), ns); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "namespace/%s created\n", args[0])
			return nil
		},
	})
	return cmd
}

// createManifest posts m as written and returns the created object's
// name (which the server picks for metadata.generateName).
func createManifest(ctx context.Context, cl *client.Client, m *manifest, flagNS string) (string, error) {
	ns, err := namespaceFor(m, flagNS, cl.Namespace())
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(m.obj)
	if err != nil {
		return "", fmt.Errorf("encode %s: %w", m.ref(), err)
	}
	data, _, err := cl.Do(ctx, http.MethodPost, client.PathFor(m.r, ns, "", ""), nil, body)
	if err != nil {
		return "", err
	}
	var created struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if json.Unmarshal(data, &created) == nil && created.Metadata.Name != "" {
		return created.Metadata.Name, nil
	}
	return m.name, nil
}

func newDeleteCommand(o *options) *cobra.Command {
	var (
		ff             fileFlags
		selector       string
		all            bool
		ignoreNotFound bool
		grace          int64
		force, now     bool
		wait           bool
		timeout        time.Duration
	)
	cmd := &cobra.Command{
		Use:   "delete TYPE NAME... | TYPE/NAME... | TYPE -l SELECTOR | TYPE --all | -f FILE",
		Short: "Delete objects by name, by label selector, or as listed in manifests",
		Long: `Delete objects by name, by label selector, or as listed in manifests.

A pod running on a node is deleted gracefully: it shows as Terminating
while its node's agent stops its containers (SIGTERM, then SIGKILL after
the grace period: the pod's terminationGracePeriodSeconds, 30 s unless it
says otherwise, or --grace-period), and it is gone once they have stopped.
delete waits for that unless --wait=false. A pod no node runs yet goes at
once.

--force --grace-period 0 removes the pod object at once without waiting
for its node. Its containers may go on running if the node is cut off, and
a replacement may then run beside them: use it only when you know the node
is down for good.`,
		Example: `  outpost delete pod web-1
  outpost delete pod web-1 --grace-period 5
  outpost delete pods -l app=web
  outpost delete pod web-1 --force --grace-period 0
  outpost delete -f web.yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if now {
				if grace != -1 {
					return usagef("--now and --grace-period cannot be specified together")
				}
				grace = 1
			}
			if grace == 0 && !force {
				// As kubectl: a bare 0 would be a force delete by accident.
				grace = 1
			}
			if force && grace < 0 {
				grace = 0
			}
			var targets []target
			switch {
			case len(ff.files) > 0:
				if len(args) > 0 || selector != "" || all {
					return usagef("-f cannot be combined with resource arguments, -l or --all")
				}
			case len(args) == 0:
				return usagef("you must specify the type of resource to delete, or -f")
			default:
				var err error
				if targets, err = parseTargets(args); err != nil {
					return err
				}
				for _, t := range targets {
					switch {
					case len(t.names) > 0 && (selector != "" || all):
						return usagef("names cannot be combined with -l or --all")
					case len(t.names) == 0 && selector == "" && !all:
						return usagef("resource(s) were provided, but no name was specified; use -l SELECTOR or --all to delete several")
					}
				}
			}
			stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
			failed := false
			var ms []manifest
			if len(ff.files) > 0 {
				var errs []error
				var err error
				if ms, errs, err = readObjects(ff, cmd.InOrStdin(), "delete"); err != nil {
					return err
				}
				for _, err := range errs {
					fmt.Fprintln(stderr, FormatError(err))
					failed = true
				}
				if len(ms) == 0 {
					return errReported
				}
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var opts client.DeleteOptions
			deleted := "deleted"
			if grace >= 0 {
				opts.GracePeriodSeconds = &grace
			}
			if force && grace == 0 {
				fmt.Fprintln(stderr, "Warning: Immediate deletion does not wait for confirmation that the running resource has been terminated. "+
					"The resource may continue to run on the cluster indefinitely.")
				deleted = "force deleted"
			}
			var pending []pendingDelete
			// gone is whether NotFound means deleted: the object's
			// namespace is deleted by the same command.
			del := func(r *api.Resource, ns, name string, gone bool) {
				obj, err := cl.DeleteWith(ctx, r, ns, name, opts)
				if err != nil && !(gone && api.IsNotFound(err)) {
					if ignoreNotFound && api.IsNotFound(err) {
						return
					}
					fmt.Fprintln(stderr, FormatError(err))
					failed = true
					return
				}
				fmt.Fprintf(stdout, "%s %q %s\n", kindName(r), name, deleted)
				if obj != nil && obj.GetObjectMeta().DeletionTimestamp != nil {
					pending = append(pending, pendingDelete{r: r, ns: ns, name: name, uid: obj.GetObjectMeta().UID})
				}
			}
			if !deleteManifests(ms, o.namespace, cl.Namespace(), stderr, del) {
				failed = true
			}
			for _, t := range targets {
				ns := ""
				if t.r.Namespaced {
					ns = cl.Namespace()
				}
				names := t.names
				if len(names) == 0 {
					q := url.Values{}
					if selector != "" {
						q.Set("labelSelector", selector)
					}
					data, _, err := cl.Do(ctx, http.MethodGet, client.PathFor(t.r, ns, "", ""), q, nil)
					if err != nil {
						return err
					}
					objs, _, err := client.DecodeList(t.r, data)
					if err != nil {
						return err
					}
					if len(objs) == 0 {
						fmt.Fprintln(stderr, noResourcesMessage([]fetched{{r: t.r}}, false, ns))
					}
					for _, obj := range objs {
						names = append(names, obj.GetObjectMeta().Name)
					}
				}
				for _, name := range names {
					del(t.r, ns, name, false)
				}
			}
			if wait && len(pending) > 0 {
				if err := waitDeleted(ctx, cl, pending, timeout); err != nil {
					fmt.Fprintln(stderr, FormatError(err))
					failed = true
				}
			}
			if failed {
				return errReported
			}
			return nil
		},
	}
	addFileFlags(cmd, &ff, "the manifests whose objects to delete")
	cmd.Flags().Int64Var(&grace, "grace-period", -1, "seconds a pod gets to stop before it is killed; negative: the pod's own (terminationGracePeriodSeconds). "+
		"0 is taken as 1 unless --force is given")
	cmd.Flags().BoolVar(&force, "force", false, "with --grace-period 0 (the default with --force), remove the object at once without waiting for its node to stop it")
	cmd.Flags().BoolVar(&now, "now", false, "stop pods at once (--grace-period 1)")
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until the objects are gone (a pod: until its node has stopped it)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "how long --wait waits (0: no limit)")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "delete the objects matching this label selector")
	cmd.Flags().BoolVar(&all, "all", false, "delete every object of the type in the namespace")
	cmd.Flags().BoolVar(&ignoreNotFound, "ignore-not-found", false, "treat an object that does not exist as deleted")
	return cmd
}

// deleteManifests deletes the objects of delete -f, namespaces last: a
// namespace deleted first would take the objects after it in the file
// along, and their own deletes would fail NotFound. An object whose
// namespace the same command deletes counts as deleted when it is already
// gone, as in kubectl. It reports whether every manifest named an object
// to delete; del reports the failures of the deletes themselves.
func deleteManifests(ms []manifest, flagNS, defaultNS string, stderr io.Writer, del func(r *api.Resource, ns, name string, gone bool)) bool {
	isNS := func(m *manifest) bool { return m.r.Kind == "Namespace" }
	deleting := map[string]bool{}
	for i := range ms {
		if isNS(&ms[i]) {
			deleting[ms[i].name] = true
		}
	}
	ordered := make([]*manifest, 0, len(ms))
	for i := range ms {
		if !isNS(&ms[i]) {
			ordered = append(ordered, &ms[i])
		}
	}
	for i := range ms {
		if isNS(&ms[i]) {
			ordered = append(ordered, &ms[i])
		}
	}
	ok := true
	for _, m := range ordered {
		ns, err := namespaceFor(m, flagNS, defaultNS)
		if err == nil && m.name == "" {
			err = fmt.Errorf("%s in %q has no metadata.name", m.r.Kind, m.source)
		}
		if err != nil {
			fmt.Fprintln(stderr, FormatError(err))
			ok = false
			continue
		}
		del(m.r, ns, m.name, ns != "" && deleting[ns])
	}
	return ok
}

// pendingDelete is an object a delete marked and did not yet remove.
type pendingDelete struct {
	r             *api.Resource
	ns, name, uid string
}

// waitDeleted waits until every object of ps is gone (or replaced by one
// with another UID), as kubectl delete does, reading each again whenever
// its watch says something changed.
func waitDeleted(ctx context.Context, cl *client.Client, ps []pendingDelete, timeout time.Duration) error {
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	for _, p := range ps {
		if err := waitGone(ctx, cl, p); err != nil {
			if ctx.Err() != nil {
				err = context.Cause(ctx)
			}
			return fmt.Errorf("waiting for %s to be deleted: %w", refName(p.r, p.name), err)
		}
	}
	return nil
}

func waitGone(ctx context.Context, cl *client.Client, p pendingDelete) error {
	opts := client.ListOptions{FieldSelector: "metadata.name=" + p.name}
	for {
		obj, err := cl.Get(ctx, p.r, p.ns, p.name, client.GetOptions{})
		if api.IsNotFound(err) || err == nil && obj.GetObjectMeta().UID != p.uid {
			return nil
		}
		if err != nil {
			return err
		}
		wctx, stop := context.WithCancel(ctx)
		ch, err := cl.Watch(wctx, p.r, p.ns, opts, obj.GetObjectMeta().ResourceVersion)
		if err != nil {
			stop()
			if !api.IsGone(err) {
				return err
			}
			continue
		}
		for ev := range ch {
			if ev.Type == client.EventDeleted || ev.Type == client.EventError {
				break
			}
		}
		stop()
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
			// A stream the server ended at once must not spin.
		}
	}
}
