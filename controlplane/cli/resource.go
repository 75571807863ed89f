package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// target is one resource type and the names asked for (none: all of them).
type target struct {
	r     *api.Resource
	names []string
}

// resourceFor resolves a type name as users type it ("po", "pods",
// "deploy", "deployments.apps").
func resourceFor(name string) (*api.Resource, error) {
	if r := api.ResourceForName(name); r != nil && name != "" {
		return r, nil
	}
	return nil, fmt.Errorf("the server doesn't have a resource type %q", name)
}

// parseTargets reads the arguments of get, describe and delete:
// `TYPE[,TYPE...] [NAME...]` or `TYPE/NAME...`. The two forms do not mix,
// as in kubectl. Targets keep the order given; names given twice are
// asked for once.
func parseTargets(args []string) ([]target, error) {
	if len(args) == 0 {
		return nil, usagef("you must specify the type of resource to get, e.g. `pods` or `nodes`")
	}
	if strings.Contains(args[0], "/") {
		var out []target
		for _, a := range args {
			typ, name, ok := strings.Cut(a, "/")
			if !ok {
				return nil, usagef("there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (e.g. 'outpost get pod/x' instead of 'outpost get pod pod/x')")
			}
			if typ == "" || name == "" || strings.Contains(name, "/") {
				return nil, usagef("arguments in resource/name form must have a single resource and name, not %q", a)
			}
			r, err := resourceFor(typ)
			if err != nil {
				return nil, err
			}
			out = addName(out, r, name)
		}
		return out, nil
	}
	names := args[1:]
	for _, n := range names {
		if strings.Contains(n, "/") {
			return nil, usagef("there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (e.g. 'outpost get pod/x' instead of 'outpost get pod pod/x')")
		}
	}
	var out []target
	for _, typ := range expandCategories(strings.Split(args[0], ",")) {
		r, err := resourceFor(typ)
		if err != nil {
			return nil, err
		}
		if len(names) == 0 {
			if !hasTarget(out, r) {
				out = append(out, target{r: r})
			}
			continue
		}
		for _, n := range names {
			out = addName(out, r, n)
		}
	}
	return out, nil
}

// oneObject reads the `TYPE NAME` or `TYPE/NAME` of a verb that works
// on a single object; what completes "VERB takes exactly one object".
func oneObject(args []string, verb string) (*api.Resource, string, error) {
	targets, err := parseTargets(args)
	if err != nil {
		return nil, "", err
	}
	if len(targets) != 1 || len(targets[0].names) != 1 {
		return nil, "", usagef("%s takes exactly one object: give TYPE NAME or TYPE/NAME", verb)
	}
	return targets[0].r, targets[0].names[0], nil
}

// hasTarget reports whether ts already holds resource r.
func hasTarget(ts []target, r *api.Resource) bool {
	for _, t := range ts {
		if t.r == r {
			return true
		}
	}
	return false
}

// addName appends name to r's target, keeping the first-seen order of types.
func addName(ts []target, r *api.Resource, name string) []target {
	for i := range ts {
		if ts[i].r == r {
			for _, n := range ts[i].names {
				if n == name {
					return ts
				}
			}
			ts[i].names = append(ts[i].names, name)
			return ts
		}
	}
	return append(ts, target{r: r, names: []string{name}})
}

// kindName is how the CLI names a resource type in messages:
// "pod", "deployment.apps", "token.outpost.io".
func kindName(r *api.Resource) string {
	if r.Group == "" {
		return r.Singular
	}
	return r.Singular + "." + r.Group
}

// refName is "pod/x", the form of -o name and of apply's messages.
func refName(r *api.Resource, name string) string {
	return kindName(r) + "/" + name
}

// statusOf finds the server's Status in err.
func statusOf(err error) (*api.StatusError, bool) {
	return errors.AsType[*api.StatusError](err)
}
