package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// restartedAtAnnotation is the pod template annotation `rollout restart`
// sets, kubectl's own name: changing the template makes the controller
// roll every pod over, as any other template change does.
const restartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"

// errPausedRestart is a restart of a paused deployment, which would not
// roll out until resumed.
var errPausedRestart = errors.New("can't restart paused deployment (run rollout resume first)")

func newRolloutRestartCommand(o *options) *cobra.Command {
	var sel selection
	cmd := &cobra.Command{
		Use:   "restart (TYPE NAME... | TYPE/NAME... | TYPE -l SELECTOR|--all)",
		Short: "Replace every pod of deployments or daemon sets, as a rolling update",
		Long: "restart writes the time into the pod template's kubectl.kubernetes.io/restartedAt\n" +
			"annotation; the template changed, the controller replaces the pods as for any other\n" +
			"change, following the update strategy. Follow it with `outpost rollout status`.",
		Example: `  outpost rollout restart deployment/web
  outpost rollout restart deploy web api -n shop
  outpost rollout restart daemonset/log-shipper`,
		Args: minArgs(1, "a deployment or daemon set, e.g. `outpost rollout restart deployment/web`"),
		RunE: func(cmd *cobra.Command, args []string) error {
			now := o.now().UTC().Format(time.RFC3339)
			stdout := cmd.OutOrStdout()
			return sel.run(cmd, o, args, "restart", func(r *api.Resource) string {
				if r != deploymentResource && r != daemonSetResource {
					return "rollout restart is not available for " + r.Plural
				}
				return ""
			}, func(cl *client.Client, r *api.Resource, ns, name string) error {
				_, _, err := updateRaw(cmd.Context(), cl, r, ns, name, func(obj map[string]any) (bool, error) {
					spec := childMap(obj, "spec")
					if paused, _ := spec["paused"].(bool); paused {
						return false, fmt.Errorf("%s: %w", refName(r, name), errPausedRestart)
					}
					ann := childMap(childMap(childMap(spec, "template"), "metadata"), "annotations")
					ann[restartedAtAnnotation] = now
					return true, nil
				})
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "%s restarted\n", refName(r, name))
				return nil
			})
		},
	}
	sel.addFlags(cmd, "restart")
	return cmd
}
