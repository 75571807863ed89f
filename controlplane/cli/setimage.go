package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// errNoContainer is a CONTAINER=IMAGE naming no container of the object.
var errNoContainer = errors.New("unable to find container named")

func newSetCommand(o *options) *cobra.Command {
	set := &cobra.Command{
		Use:   "set",
		Short: "Change one aspect of objects (set image)",
	}
	set.AddCommand(newSetImageCommand(o))
	return set
}

// imageChange is one CONTAINER=IMAGE argument; container "*" is every
// container.
type imageChange struct{ container, image string }

func newSetImageCommand(o *options) *cobra.Command {
	var sel selection
	cmd := &cobra.Command{
		Use:   "image (TYPE NAME... | TYPE/NAME... | TYPE -l SELECTOR|--all) CONTAINER=IMAGE...",
		Short: "Change the image of containers of pods, deployments, daemon sets and replica sets",
		Long: "set image changes the image of the named containers (init containers too); * names\n" +
			"every container. A deployment or daemon set then rolls the new template out; a pod's\n" +
			"node restarts the changed container.",
		Example: `  outpost set image deployment/web web=registry.local/web:1.2
  outpost set image deploy/web web=web:1.2 sidecar=proxy:2
  outpost set image daemonset/log-shipper '*=shipper:3'
  outpost set image pod/debug main=busybox:1.37`,
		Args: minArgs(2, "an object and at least one CONTAINER=IMAGE, e.g. `outpost set image deployment/web web=web:1.2`"),
		RunE: func(cmd *cobra.Command, args []string) error {
			split := slices.IndexFunc(args, func(a string) bool { return strings.Contains(a, "=") })
			if split < 1 {
				return usagef("expected an object, then at least one CONTAINER=IMAGE")
			}
			var changes []imageChange
			for _, a := range args[split:] {
				c, img, _ := strings.Cut(a, "=")
				if c == "" || img == "" {
					return usagef("%q is not CONTAINER=IMAGE", a)
				}
				changes = append(changes, imageChange{container: c, image: img})
			}
			stdout := cmd.OutOrStdout()
			return sel.run(cmd, o, args[:split], "change", func(r *api.Resource) string {
				if podSpecPath(r) == nil {
					return "set image is not available for " + r.Plural + ": it changes pods, deployments, daemon sets and replica sets"
				}
				return ""
			}, func(cl *client.Client, r *api.Resource, ns, name string) error {
				_, changed, err := updateRaw(cmd.Context(), cl, r, ns, name, func(obj map[string]any) (bool, error) {
					return setImages(nestedMap(obj, podSpecPath(r)...), changes)
				})
				_, fromServer := statusOf(err)
				switch {
				case err != nil && fromServer:
					// The server's message names the object already.
					return err
				case err != nil:
					return fmt.Errorf("%s: %w", refName(r, name), err)
				case changed:
					fmt.Fprintf(stdout, "%s image updated\n", refName(r, name))
				default:
					fmt.Fprintf(stdout, "%s image unchanged\n", refName(r, name))
				}
				return nil
			})
		},
	}
	sel.addFlags(cmd, "change")
	return cmd
}

// podSpecPath is where the pod spec of r's objects is, nil for kinds
// without one.
func podSpecPath(r *api.Resource) []string {
	switch r.Kind {
	case "Pod":
		return []string{"spec"}
	case "Deployment", "DaemonSet", "ReplicaSet":
		return []string{"spec", "template", "spec"}
	}
	return nil
}

// setImages applies changes to the containers and init containers of a
// raw pod spec. Every change must name a container (or be *); it reports
// whether an image changed.
func setImages(spec map[string]any, changes []imageChange) (bool, error) {
	var containers []map[string]any
	for _, list := range []string{"initContainers", "containers"} {
		items, _ := spec[list].([]any)
		for _, it := range items {
			if c, ok := it.(map[string]any); ok {
				containers = append(containers, c)
			}
		}
	}
	changed := false
	var missing []string
	for _, ch := range changes {
		found := false
		for _, c := range containers {
			if ch.container != "*" && c["name"] != ch.container {
				continue
			}
			found = true
			if c["image"] != ch.image {
				c["image"] = ch.image
				changed = true
			}
		}
		if !found {
			missing = append(missing, fmt.Sprintf("%q", ch.container))
		}
	}
	if len(missing) > 0 {
		return false, fmt.Errorf("%w %s", errNoContainer, strings.Join(missing, ", "))
	}
	return changed, nil
}
