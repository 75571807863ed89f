package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

func newScaleCommand(o *options) *cobra.Command {
	var (
		replicas int
		current  int
		sel      selection
	)
	cmd := &cobra.Command{
		Use:   "scale (TYPE NAME... | TYPE/NAME... | TYPE -l SELECTOR|--all) --replicas=COUNT",
		Short: "Set the number of replicas of deployments and replica sets",
		Long: "scale sets spec.replicas; the controller then adds or removes pods. With\n" +
			"--current-replicas the change is made only if the object has that many replicas now,\n" +
			"so two people scaling at once do not undo each other unnoticed.",
		Example: `  outpost scale deployment/web --replicas=3
  outpost scale deploy web api --replicas=0 -n shop
  outpost scale --current-replicas=2 --replicas=3 deployment/web
  outpost scale rs -l app=web --replicas=1`,
		Args: minArgs(1, "a deployment or replica set, e.g. `outpost scale deployment/web --replicas=3`"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if replicas < 0 {
				return usagef("--replicas=COUNT is required, and COUNT must be 0 or more")
			}
			stdout := cmd.OutOrStdout()
			return sel.run(cmd, o, args, "scale", func(r *api.Resource) string {
				if !scalable(r) {
					return r.Plural + " cannot be scaled: only deployments and replicasets have replicas"
				}
				return ""
			}, func(cl *client.Client, r *api.Resource, ns, name string) error {
				if err := scaleOne(cmd.Context(), cl, r, ns, name, int64(replicas), int64(current)); err != nil {
					return err
				}
				fmt.Fprintf(stdout, "%s scaled\n", refName(r, name))
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&replicas, "replicas", -1, "the new number of replicas (required)")
	f.IntVar(&current, "current-replicas", -1, "scale only if the current number of replicas is this (-1: no condition)")
	sel.addFlags(cmd, "scale")
	return cmd
}

// scalable reports whether r has spec.replicas that scale may set.
func scalable(r *api.Resource) bool {
	return r.Kind == "Deployment" || r.Kind == "ReplicaSet"
}

// specReplicas reads spec.replicas of a raw object; absent means the
// API's default of 1.
func specReplicas(obj map[string]any) (int64, error) {
	v, ok := nestedMap(obj, "spec")["replicas"]
	if !ok || v == nil {
		return 1, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%w: spec.replicas is %v, not a number", errBadJSON, v)
	}
	i, err := n.Int64()
	if err != nil {
		return 0, fmt.Errorf("%w: spec.replicas: %w", errBadJSON, err)
	}
	return i, nil
}

// scaleOne sets spec.replicas with a conditional update, checking the
// --current-replicas precondition (current < 0: none) against every
// version it reads. Scaling to the count already set writes nothing.
func scaleOne(ctx context.Context, cl *client.Client, r *api.Resource, ns, name string, replicas, current int64) error {
	_, _, err := updateRaw(ctx, cl, r, ns, name, func(obj map[string]any) (bool, error) {
		cur, err := specReplicas(obj)
		if err != nil {
			return false, err
		}
		if current >= 0 && cur != current {
			return false, fmt.Errorf("%w: expected replicas to be %d, was %d", errPrecondition, current, cur)
		}
		if cur == replicas {
			return false, nil
		}
		childMap(obj, "spec")["replicas"] = json.Number(strconv.FormatInt(replicas, 10))
		return true, nil
	})
	return err
}
