package cli

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

var poolResource = api.ResourceForKind("MachineConfigPool")

// newUpgradeCommand is `adm upgrade`: the cluster's version and updates
// (upgrade.go), and its nodes half, pausing and resuming a pool's rolling
// update (SPEC UPD-8).
func newUpgradeCommand(o *options) *cobra.Command {
	up := newClusterUpgradeCommand(o)
	var pool string
	var pause, resume bool
	nodes := &cobra.Command{
		Use:   "nodes --pool POOL --pause|--resume",
		Short: "Pause or resume a machine config pool's rolling update",
		Long: `Pause or resume a machine config pool's rolling update (spec.paused).

A paused pool starts updating no more nodes; nodes already updating finish.
Resuming lets the pool go on, at most maxUnavailable nodes at a time. Watch
the progress with 'outpost get mcp -w' and 'outpost describe mcp POOL'.`,
		Example: `  outpost adm upgrade nodes --pool worker --pause
  outpost adm upgrade nodes --pool worker --resume`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if pool == "" {
				return usagef("--pool is required")
			}
			if pause == resume {
				return usagef("give one of --pause and --resume")
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			_, wrote, err := updateRaw(cmd.Context(), cl, poolResource, "", pool, func(obj map[string]any) (bool, error) {
				spec := childMap(obj, "spec")
				was, _ := spec["paused"].(bool)
				if was == pause {
					return false, nil
				}
				spec["paused"] = pause
				return true, nil
			})
			if err != nil {
				return err
			}
			state := map[bool]string{true: "paused", false: "resumed"}[pause]
			if !wrote {
				state = "already " + map[bool]string{true: "paused", false: "running"}[pause]
			}
			fmt.Fprintf(cmd.OutOrStdout(), "machineconfigpool/%s %s\n", pool, state)
			return nil
		},
	}
	nodes.Flags().StringVar(&pool, "pool", "", "the machine config pool")
	nodes.Flags().BoolVar(&pause, "pause", false, "start updating no more nodes")
	nodes.Flags().BoolVar(&resume, "resume", false, "go on updating")
	up.AddCommand(nodes)
	return up
}

// newFleetLockCommand is `adm fleetlock`: the reboot locks FleetLock
// clients (Zincati and others) hold in machine config pools.
func newFleetLockCommand(o *options) *cobra.Command {
	fl := &cobra.Command{
		Use:   "fleetlock",
		Short: "List and release the reboot locks of FleetLock clients",
		Long: `Hosts that update themselves (Fedora CoreOS's Zincati, Flatcar) ask the control
plane for a reboot lock over FleetLock: give them
base_url = "https://SERVER:6443/fleetlock/TOKEN/" with a token of
'outpost adm token create --role fleetlock' (good for nothing else). Their
group names a machine config pool
("default" is worker); a lock takes a place in the pool's maxUnavailable,
shared with the pool's own updating nodes, until the host reports steady
state. A host that died holding one keeps it: release it here.`,
	}
	var pool string
	list := &cobra.Command{
		Use:   "list",
		Short: "List the held reboot locks",
		Example: `  outpost adm fleetlock list
  outpost adm fleetlock list --pool worker`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			pools, err := listPools(cmd, cl, pool)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 8, 3, ' ', 0)
			fmt.Fprintln(tw, "POOL\tID\tHELD FOR")
			n := 0
			for _, p := range pools {
				for _, h := range api.FleetLockHolders(p) {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, h.ID, age(time.Now(), &h.Since))
					n++
				}
			}
			if n == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "No reboot locks held")
				return nil
			}
			return tw.Flush()
		},
	}
	list.Flags().StringVar(&pool, "pool", "", "only this pool")
	var relPool string
	release := &cobra.Command{
		Use:     "release ID --pool POOL",
		Short:   "Release a reboot lock a FleetLock client holds",
		Example: "  outpost adm fleetlock release 9f2c...e1 --pool worker",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if relPool == "" {
				return usagef("--pool is required")
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			id := args[0]
			_, wrote, err := updateRaw(cmd.Context(), cl, poolResource, "", relPool, func(obj map[string]any) (bool, error) {
				meta := childMap(obj, "metadata")
				ann := childMap(meta, "annotations")
				var holders []api.FleetLockHolder
				if v, _ := ann[api.AnnotationFleetLockHolders].(string); v != "" {
					if err := json.Unmarshal([]byte(v), &holders); err != nil {
						return false, fmt.Errorf("annotation %s: %w", api.AnnotationFleetLockHolders, err)
					}
				}
				i := slices.IndexFunc(holders, func(h api.FleetLockHolder) bool { return h.ID == id })
				if i < 0 {
					return false, nil
				}
				holders = slices.Delete(holders, i, i+1)
				if len(holders) == 0 {
					delete(ann, api.AnnotationFleetLockHolders)
					return true, nil
				}
				b, err := json.Marshal(holders)
				if err != nil {
					return false, err
				}
				ann[api.AnnotationFleetLockHolders] = string(b)
				return true, nil
			})
			if err != nil {
				return err
			}
			if !wrote {
				return fmt.Errorf("%s holds no reboot lock of pool %s", id, relPool)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "released the reboot lock of %s in pool %s\n", id, relPool)
			return nil
		},
	}
	release.Flags().StringVar(&relPool, "pool", "", "the pool the lock is in")
	fl.AddCommand(list, release)
	return fl
}

func listPools(cmd *cobra.Command, cl *client.Client, only string) ([]*api.MachineConfigPool, error) {
	objs, _, err := cl.List(cmd.Context(), poolResource, "", client.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []*api.MachineConfigPool
	for _, o := range objs {
		if p, ok := o.(*api.MachineConfigPool); ok && (only == "" || p.Name == only) {
			out = append(out, p)
		}
	}
	if only != "" && len(out) == 0 {
		return nil, fmt.Errorf("machineconfigpools %q not found", only)
	}
	slices.SortFunc(out, func(a, b *api.MachineConfigPool) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
