package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

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
	cmd.AddCommand(&cobra.Command{
		Use:     "namespace NAME",
		Aliases: []string{"ns"},
		Short:   "Create a namespace",
		Args:    exactArgs(1, "the name of the namespace"),
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
	)
	cmd := &cobra.Command{
		Use:   "delete TYPE NAME... | TYPE/NAME... | TYPE -l SELECTOR | TYPE --all | -f FILE",
		Short: "Delete objects by name, by label selector, or as listed in manifests",
		Example: `  outpost delete pod web-1
  outpost delete pods -l app=web
  outpost delete -f web.yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
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
			// gone is whether NotFound means deleted: the object's
			// namespace is deleted by the same command.
			del := func(r *api.Resource, ns, name string, gone bool) {
				_, _, err := cl.Do(ctx, http.MethodDelete, client.PathFor(r, ns, name, ""), nil, nil)
				if err != nil && !(gone && api.IsNotFound(err)) {
					if ignoreNotFound && api.IsNotFound(err) {
						return
					}
					fmt.Fprintln(stderr, FormatError(err))
					failed = true
					return
				}
				fmt.Fprintf(stdout, "%s %q deleted\n", kindName(r), name)
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
			if failed {
				return errReported
			}
			return nil
		},
	}
	addFileFlags(cmd, &ff, "the manifests whose objects to delete")
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
