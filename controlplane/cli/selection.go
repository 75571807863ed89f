package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// selection is the -l and --all of a verb that works on named objects
// or on those a selector chooses (scale, set image, rollout restart,
// wait).
type selection struct {
	selector string
	all      bool
}

// addFlags adds -l and --all; verb says what is done to the objects.
func (s *selection) addFlags(cmd *cobra.Command, verb string) {
	cmd.Flags().StringVarP(&s.selector, "selector", "l", "", verb+" the objects of the type matching this label selector, in the namespace")
	cmd.Flags().BoolVar(&s.all, "all", false, verb+" every object of the type in the namespace")
}

// run reads the objects of args (see parseSelection) and runs each on
// every one (see forEachSelected).
func (s *selection) run(cmd *cobra.Command, o *options, args []string, verb string, refuse func(*api.Resource) string,
	each func(cl *client.Client, r *api.Resource, ns, name string) error) error {
	targets, err := parseSelection(args, s.selector, s.all, verb, refuse)
	if err != nil {
		return err
	}
	cl, err := o.client(cmd)
	if err != nil {
		return err
	}
	return forEachSelected(cmd.Context(), cl, targets, s.selector, s.selector != "" || s.all, cmd.ErrOrStderr(), func(r *api.Resource, ns, name string) error {
		return each(cl, r, ns, name)
	})
}

// parseSelection reads the objects of a verb that takes names or -l and
// --all: the types and names of parseTargets, each type checked by
// refuse (a usage message for a type the verb does not work on, "" for
// one it does), and the selection by checkSelection.
func parseSelection(args []string, selector string, all bool, verb string, refuse func(*api.Resource) string) ([]target, error) {
	targets, err := parseTargets(args)
	if err != nil {
		return nil, err
	}
	for _, t := range targets {
		if msg := refuse(t.r); msg != "" {
			return nil, usagef("%s", msg)
		}
	}
	return targets, checkSelection(targets, selector, all, verb)
}

// checkSelection checks the objects a verb works on are chosen one way:
// `TYPE NAME...` (or `TYPE/NAME...`), or `TYPE -l SELECTOR`, or `TYPE
// --all`. verb completes "use -l SELECTOR or --all to VERB several".
func checkSelection(targets []target, selector string, all bool, verb string) error {
	if selector != "" && all {
		return usagef("--all and --selector cannot be given together")
	}
	bySelector := selector != "" || all
	for _, t := range targets {
		switch {
		case bySelector && len(t.names) > 0:
			return usagef("names cannot be combined with -l or --all")
		case !bySelector && len(t.names) == 0:
			return usagef("resource(s) were provided, but no name was specified; use -l SELECTOR or --all to %s several", verb)
		}
	}
	return nil
}

// forEachSelected runs each on every object checkSelection accepted: the
// names given, or with bySelector the objects of each type matching
// selector ("" for all) in the namespace, saying so for a type that has
// none. Every object is tried; a failure is printed to stderr and makes
// the result errReported.
func forEachSelected(ctx context.Context, cl *client.Client, targets []target, selector string, bySelector bool, stderr io.Writer,
	each func(r *api.Resource, ns, name string) error) error {
	failed := false
	for _, t := range targets {
		ns := ""
		if t.r.Namespaced {
			ns = cl.Namespace()
		}
		names := t.names
		if bySelector {
			var err error
			if names, err = listNames(ctx, cl, t.r, ns, selector); err != nil {
				return err
			}
			if len(names) == 0 {
				fmt.Fprintln(stderr, noResourcesMessage([]fetched{{r: t.r}}, false, ns))
			}
		}
		for _, name := range names {
			if err := each(t.r, ns, name); err != nil {
				fmt.Fprintln(stderr, FormatError(err))
				failed = true
			}
		}
	}
	if failed {
		return errReported
	}
	return nil
}
