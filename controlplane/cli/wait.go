package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// errObjectDeleted is an object deleted while wait waited for one of its
// conditions.
var errObjectDeleted = errors.New("was deleted while waiting for its condition")

// errNoMatches is a wait for a condition of no object at all, which
// kubectl fails rather than call the condition met.
var errNoMatches = errors.New("no matching resources found")

// waitFor is a parsed --for: deletion, or a condition's type and the
// status it must have.
type waitFor struct {
	delete          bool
	create          bool // --for=create: until the object exists
	condition, want string
	// path is --for=jsonpath's expression: met when it reaches a value
	// printing as want, or, when hasValue is false, any value at all.
	path     *jpPath
	hasValue bool
}

func parseWaitFor(s string) (waitFor, error) {
	switch s {
	case "delete":
		return waitFor{delete: true}, nil
	case "create":
		return waitFor{create: true}, nil
	}
	if rest, ok := strings.CutPrefix(s, "condition="); ok {
		cond, want, hasValue := strings.Cut(rest, "=")
		if !hasValue {
			want = "True"
		}
		if cond == "" || want == "" {
			return waitFor{}, usagef("--for=condition= needs a condition, e.g. --for=condition=Ready or --for=condition=Ready=false")
		}
		return waitFor{condition: cond, want: want}, nil
	}
	if rest, ok := strings.CutPrefix(s, "jsonpath="); ok {
		return parseWaitJSONPath(rest)
	}
	return waitFor{}, usagef("--for must be create, delete, condition=NAME[=VALUE] or jsonpath='{PATH}'[=VALUE], not %q", s)
}

// parseWaitJSONPath reads kubectl's --for=jsonpath='{.status.phase}'=Running:
// a path in braces (or bare, up to the first '='), then, optionally, '='
// and the value it must print as.
func parseWaitJSONPath(s string) (waitFor, error) {
	expr, value, hasValue := "", "", false
	if strings.HasPrefix(s, "{") {
		end, err := actionEnd(s, 1)
		if err != nil {
			return waitFor{}, usagef("--for=jsonpath=%s: %v", s, err)
		}
		expr = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			v, ok := strings.CutPrefix(rest, "=")
			if !ok {
				return waitFor{}, usagef("--for=jsonpath=%s: want '{PATH}' or '{PATH}=VALUE'", s)
			}
			value, hasValue = v, true
		}
	} else {
		expr, value, hasValue = strings.Cut(s, "=")
	}
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return waitFor{}, usagef("--for=jsonpath= needs a path, e.g. --for=jsonpath='{.status.phase}'=Running")
	}
	if !strings.HasPrefix(expr, ".") && !strings.HasPrefix(expr, "$") && !strings.HasPrefix(expr, "@") {
		expr = "." + expr
	}
	p, err := parseJSONPathExpr(expr)
	if err != nil {
		return waitFor{}, usagef("--for=jsonpath=%s: %v", s, err)
	}
	return waitFor{path: p, want: value, hasValue: hasValue}, nil
}

func newWaitCommand(o *options) *cobra.Command {
	var (
		forFlag string
		timeout time.Duration
		sel     selection
	)
	cmd := &cobra.Command{
		Use:   "wait (TYPE NAME... | TYPE/NAME... | TYPE -l SELECTOR|--all) --for=condition=NAME[=VALUE]|jsonpath='{PATH}'[=VALUE]|create|delete [--timeout=30s]",
		Short: "Wait until objects have a condition, or are deleted",
		Long: "wait follows each object until a condition of its status has the value asked for\n" +
			"(True unless given; names and values compare regardless of case), until a JSONPath\n" +
			"of it prints as the value given (or reaches any value, without one), or until it is\n" +
			"gone with --for=delete, or until it exists with --for=create. It prints a line per object and fails if --timeout passes\n" +
			"first (0: check once; negative: a week).",
		Example: `  outpost wait --for=condition=Ready pod/web-1
  outpost wait --for=condition=Available deployment/web --timeout=2m
  outpost wait --for=condition=Ready pods -l app=web
  outpost wait --for=jsonpath='{.status.phase}'=Running pod/web-1
  outpost wait --for=delete pod/web-1 --timeout=60s
  outpost wait --for=create deployment/web`,
		Args: minArgs(1, "the objects to wait for, e.g. `outpost wait --for=condition=Ready pod/web`"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if forFlag == "" {
				return usagef("--for is required: condition=NAME[=VALUE], jsonpath='{PATH}'[=VALUE], create or delete")
			}
			wf, err := parseWaitFor(forFlag)
			if err != nil {
				return err
			}
			if timeout < 0 {
				timeout = 7 * 24 * time.Hour
			}
			ctx := cmd.Context()
			stdout := cmd.OutOrStdout()
			// One deadline for every object, as kubectl's.
			wctx, cancel := context.WithTimeoutCause(ctx, max(timeout, time.Millisecond), errTimedOut)
			defer cancel()
			waited := 0
			err = sel.run(cmd, o, args, "wait for", func(*api.Resource) string { return "" }, func(cl *client.Client, r *api.Resource, ns, name string) error {
				waited++
				if err := waitOne(wctx, cl, r, ns, name, wf, timeout == 0); err != nil {
					if errors.Is(err, errTimedOut) || (wctx.Err() != nil && ctx.Err() == nil) {
						return fmt.Errorf("%w on %s/%s", errTimedOut, r.Plural, name)
					}
					return err
				}
				if wf.delete {
					fmt.Fprintf(stdout, "%s deleted\n", refName(r, name))
				} else {
					fmt.Fprintf(stdout, "%s condition met\n", refName(r, name))
				}
				return nil
			})
			if err == nil && waited == 0 && !wf.delete {
				return errNoMatches
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&forFlag, "for", "", "what to wait for: condition=NAME[=VALUE], jsonpath='{PATH}'[=VALUE], create or delete")
	f.DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long, for all the objects together (0: check once; negative: a week)")
	sel.addFlags(cmd, "wait for")
	return cmd
}

// waitOne waits for one object. once: look once, without watching.
func waitOne(ctx context.Context, cl *client.Client, r *api.Resource, ns, name string, wf waitFor, once bool) error {
	if wf.create {
		return waitCreated(ctx, cl, r, ns, name, once)
	}
	obj, err := cl.Get(ctx, r, ns, name, client.GetOptions{Consistent: true})
	if wf.delete {
		switch {
		case api.IsNotFound(err):
			return nil
		case err != nil:
			return err
		case once:
			return errTimedOut
		}
		return waitGone(ctx, cl, pendingDelete{r: r, ns: ns, name: name, uid: obj.GetObjectMeta().UID})
	}
	// err is assigned, never declared, in the loop: a shadowed err lost
	// nextVersion's timeout or deletion and judged a nil object next.
	for {
		if err != nil {
			return err
		}
		var met bool
		if met, err = hasCondition(obj, wf); met || err != nil {
			return err
		}
		if once {
			return errTimedOut
		}
		obj, err = nextVersion(ctx, cl, r, ns, name, obj.GetObjectMeta().ResourceVersion, func(o api.Object) bool {
			met, _ := hasCondition(o, wf)
			return met
		})
	}
}

// nextVersion watches one object from rv and returns the first version
// done accepts, or, when the watch ends or falls out of the server's
// window, the object read again for the caller to judge. A deletion is
// errObjectDeleted.
func nextVersion(ctx context.Context, cl *client.Client, r *api.Resource, ns, name, rv string, done func(api.Object) bool) (api.Object, error) {
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	ch, err := cl.Watch(wctx, r, ns, client.ListOptions{FieldSelector: "metadata.name=" + name}, rv)
	if err != nil && !api.IsGone(err) {
		return nil, err
	}
	if err == nil {
		for ev := range ch {
			switch ev.Type {
			case client.EventDeleted:
				return nil, fmt.Errorf("%s %w", refName(r, name), errObjectDeleted)
			case client.EventAdded, client.EventModified:
				if done(ev.Object) {
					return ev.Object, nil
				}
			case client.EventError:
				if !api.IsGone(ev.Err) {
					return nil, ev.Err
				}
				return getAgain(ctx, cl, r, ns, name)
			}
		}
		// The stream ended: a pause, so that a server ending streams at
		// once is not hammered.
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return getAgain(ctx, cl, r, ns, name)
}

// getAgain reads a watched object again; gone, it was deleted while
// watched, which is errObjectDeleted as a deletion event is.
func getAgain(ctx context.Context, cl *client.Client, r *api.Resource, ns, name string) (api.Object, error) {
	obj, err := cl.Get(ctx, r, ns, name, client.GetOptions{Consistent: true})
	if api.IsNotFound(err) {
		return nil, fmt.Errorf("%s %w", refName(r, name), errObjectDeleted)
	}
	return obj, err
}

// hasCondition reports whether obj's status has the condition of wf with
// its value, comparing both regardless of case as kubectl does; or, for
// --for=jsonpath, whether the path reaches the value asked for (exactly,
// as kubectl compares it).
func hasCondition(obj api.Object, wf waitFor) (bool, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return false, fmt.Errorf("encode %T: %w", obj, err)
	}
	if wf.path != nil {
		doc, err := decodeDocument(data)
		if err != nil {
			return false, err
		}
		for _, v := range wf.path.eval(doc, doc) {
			if !wf.hasValue || formatValue(v) == wf.want {
				return true, nil
			}
		}
		return false, nil
	}
	raw, err := decodeJSONMap(data)
	if err != nil {
		return false, err
	}
	conds, _ := nestedMap(raw, "status")["conditions"].([]any)
	for _, c := range conds {
		cm, _ := c.(map[string]any)
		typ, _ := cm["type"].(string)
		status, _ := cm["status"].(string)
		if strings.EqualFold(typ, wf.condition) {
			return strings.EqualFold(status, wf.want), nil
		}
	}
	return false, nil
}

// waitCreated waits until the object exists (--for=create): a read, then
// a watch of its name from the list's version, read again whenever the
// watch ends or falls out of the server's window.
func waitCreated(ctx context.Context, cl *client.Client, r *api.Resource, ns, name string, once bool) error {
	sel := client.ListOptions{FieldSelector: "metadata.name=" + name}
	for {
		_, err := cl.Get(ctx, r, ns, name, client.GetOptions{Consistent: true})
		switch {
		case err == nil:
			return nil
		case !api.IsNotFound(err):
			return err
		case once:
			return errTimedOut
		}
		// The list's version: a creation after the read is in the watch.
		_, rv, err := cl.List(ctx, r, ns, sel)
		if err != nil {
			return err
		}
		if created, err := watchCreated(ctx, cl, r, ns, sel, rv); created || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// watchCreated reports whether the watch from rv saw the object, until
// the stream ends.
func watchCreated(ctx context.Context, cl *client.Client, r *api.Resource, ns string, sel client.ListOptions, rv string) (bool, error) {
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	ch, err := cl.Watch(wctx, r, ns, sel, rv)
	if api.IsGone(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for ev := range ch {
		switch ev.Type {
		case client.EventAdded, client.EventModified:
			return true, nil
		case client.EventError:
			if !api.IsGone(ev.Err) {
				return false, ev.Err
			}
			return false, nil
		}
	}
	if err := context.Cause(ctx); err != nil {
		return false, err
	}
	return false, nil
}
