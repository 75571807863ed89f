package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// newRolloutPauseCommand builds `rollout pause` (pause true) or `rollout
// resume` (pause false): both set a deployment's spec.paused, which stops
// or lets go on the rolling out of template changes (the deployment
// controller honours it; scaling goes on while paused).
func newRolloutPauseCommand(o *options, pause bool) *cobra.Command {
	verb, done, already := "pause", "paused", "is already paused"
	short := "Stop a deployment from rolling out template changes"
	long := "pause sets spec.paused: changes to the pod template (set image, edit, apply) are stored\n" +
		"but not rolled out until `outpost rollout resume`, so several can go out as one rollout.\n" +
		"Scaling still takes effect while paused."
	example := `  outpost rollout pause deployment/web
  outpost set image deployment/web web=registry.example/web:2
  outpost rollout resume deployment/web`
	if !pause {
		verb, done, already = "resume", "resumed", "is not paused"
		short = "Let a paused deployment roll out its template again"
		long = "resume clears spec.paused; the controller then rolls out the template changes made\n" +
			"while the deployment was paused, as one rollout. Follow it with `outpost rollout status`."
		example = `  outpost rollout resume deployment/web
  outpost rollout resume deploy web api -n shop`
	}
	var sel selection
	cmd := &cobra.Command{
		Use:     verb + " (TYPE NAME... | TYPE/NAME... | TYPE -l SELECTOR|--all)",
		Short:   short,
		Long:    long,
		Example: example,
		Args:    minArgs(1, "a deployment, e.g. `outpost rollout "+verb+" deployment/web`"),
		RunE: func(cmd *cobra.Command, args []string) error {
			stdout := cmd.OutOrStdout()
			return sel.run(cmd, o, args, verb, func(r *api.Resource) string {
				if r != deploymentResource {
					return "rollout " + verb + " is not available for " + r.Plural + ": only deployments can be paused"
				}
				return ""
			}, func(cl *client.Client, r *api.Resource, ns, name string) error {
				_, _, err := updateRaw(cmd.Context(), cl, r, ns, name, func(obj map[string]any) (bool, error) {
					spec := childMap(obj, "spec")
					if paused, _ := spec["paused"].(bool); paused == pause {
						return false, fmt.Errorf("%s %q %s", qualifiedPlural(r), name, already)
					}
					if pause {
						spec["paused"] = true
					} else {
						delete(spec, "paused")
					}
					return true, nil
				})
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "%s %s\n", refName(r, name), done)
				return nil
			})
		},
	}
	sel.addFlags(cmd, verb)
	return cmd
}

// qualifiedPlural is how kubectl names a type in its messages:
// "deployments.apps", or "pods" for the core group.
func qualifiedPlural(r *api.Resource) string {
	if r.Group == "" {
		return r.Plural
	}
	return r.Plural + "." + r.Group
}
