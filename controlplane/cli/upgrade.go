package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

var clusterVersionResource = api.ResourceForKind("ClusterVersion")

// newClusterUpgradeCommand is `adm upgrade` itself (SPEC UPD-10): the
// cluster's version, upstream, channel and updates, as oc adm upgrade
// prints them; `adm upgrade channel` sets the channel.
func newClusterUpgradeCommand(o *options) *cobra.Command {
	var (
		notRecommended, allowNotRecommended, allowExplicit, force, clear bool
		to, toImage                                                      string
		wait                                                             bool
		waitTimeout                                                      time.Duration
	)
	up := &cobra.Command{
		Use:   "upgrade",
		Short: "Show the cluster's version and the updates it may take; pause or resume node updates",
		Long: `Without a subcommand, upgrade prints the cluster's version, its update service
(spec.upstream) and channel, the recommended updates, and with --include-not-recommended the
updates whose known risks apply to this cluster, each risk with its reason, message and URL.
The control plane asks the channel's update graph every five minutes and evaluates the risks
against the cluster as it is now.

--to VERSION (an update listed) or --to-image PAYLOAD (a payload reference, URL@sha256:DIGEST)
sets the release the cluster is to run; one not recommended for this cluster needs
--allow-not-recommended, which records its risks as accepted. The control plane fetches the
payload, verifies its signature with the cluster's trusted keys (spec.trustedKeys) and validates
its manifests, and says in ReleaseAccepted what came of it. --clear takes the request back.

--wait follows the update until the control plane runs the release and every machine config
pool has updated its nodes, showing the progress on stderr (a line rewritten on a terminal,
else a line every few seconds).`,
		Example: `  outpost adm upgrade
  outpost adm upgrade --include-not-recommended
  outpost adm upgrade channel stable-1
  outpost adm upgrade --to 1.3.0
  outpost adm upgrade --to 1.4.0 --allow-not-recommended
  outpost adm upgrade --to 1.3.0 --wait --timeout 1h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n := 0
			for _, b := range []bool{to != "", toImage != "", clear} {
				if b {
					n++
				}
			}
			if n > 1 {
				return usagef("give one of --to, --to-image and --clear")
			}
			if (force || allowNotRecommended || allowExplicit) && to == "" && toImage == "" {
				return usagef("--force, --allow-not-recommended and --allow-explicit-upgrade go with --to or --to-image")
			}
			if toImage != "" && !api.PinnedByDigest(toImage) {
				return usagef("--to-image %q: name a payload pinned by its digest, URL@sha256:<64 hex digits>, as 'adm upgrade' lists them", toImage)
			}
			if clear && wait {
				return usagef("--wait follows an update: it does not go with --clear")
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			follow := func() error {
				ctx, cancel := withTimeout(cmd.Context(), waitTimeout)
				defer cancel()
				return followUpgrade(ctx, cl, newProgressOn(cmd.ErrOrStderr()), cmd.OutOrStdout())
			}
			obj, err := cl.Get(cmd.Context(), clusterVersionResource, "", api.ClusterVersionName, client.GetOptions{Consistent: true})
			if err != nil {
				return err
			}
			cv := obj.(*api.ClusterVersion)
			if n == 0 {
				if wait {
					return follow()
				}
				printUpgrade(cmd.OutOrStdout(), cv, notRecommended)
				return nil
			}
			var desired map[string]any
			switch {
			case clear && cv.Spec.DesiredUpdate == nil:
				fmt.Fprintln(cmd.OutOrStdout(), "No update was requested.")
				return nil
			case clear:
			default:
				risks, err := risksToAccept(cv, to, toImage, allowNotRecommended, allowExplicit)
				if err != nil {
					return err
				}
				if toImage != "" {
					desired = map[string]any{"image": toImage}
				} else {
					desired = map[string]any{"version": to}
				}
				if len(risks) > 0 {
					desired["acceptRisks"] = risks
				}
			}
			if force && desired != nil {
				desired["force"] = true
			}
			_, _, err = updateRaw(cmd.Context(), cl, clusterVersionResource, "", api.ClusterVersionName, func(obj map[string]any) (bool, error) {
				spec := childMap(obj, "spec")
				if desired == nil {
					_, had := spec["desiredUpdate"]
					delete(spec, "desiredUpdate")
					return had, nil
				}
				spec["desiredUpdate"] = desired
				return true, nil
			})
			if err != nil {
				return err
			}
			switch {
			case clear:
				fmt.Fprintln(cmd.OutOrStdout(), "Cleared the requested update.")
			case toImage != "":
				fmt.Fprintf(cmd.OutOrStdout(), "Requested update to release image %s\n", toImage)
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "Requested update to %s\n", to)
			}
			if wait {
				return follow()
			}
			return nil
		},
	}
	up.Flags().BoolVar(&notRecommended, "include-not-recommended", false, "also list the updates whose risks apply to this cluster")
	up.Flags().StringVar(&to, "to", "", "update to this version (one of the updates listed)")
	up.Flags().StringVar(&toImage, "to-image", "", "update to this payload (URL@sha256:DIGEST)")
	up.Flags().BoolVar(&allowNotRecommended, "allow-not-recommended", false, "take an update whose risks apply to this cluster, accepting them")
	up.Flags().BoolVar(&allowExplicit, "allow-explicit-upgrade", false, "take a --to-image payload that is not among the updates listed")
	up.Flags().BoolVar(&force, "force", false, "skip the update's precondition checks: every cluster operator Available and not Degraded, no machine config pool updating, every server a reachable, caught-up voter ready to replace its binary (never the signature, nor the risks)")
	up.Flags().BoolVar(&clear, "clear", false, "take back a requested update")
	up.Flags().BoolVar(&wait, "wait", false, "follow the update until the control plane and every node run the release")
	up.Flags().DurationVar(&waitTimeout, "timeout", 0, "with --wait: give up after this long (0: no limit)")
	channel := &cobra.Command{
		Use:   "channel NAME",
		Short: "Set the update channel the cluster follows",
		Example: `  outpost adm upgrade channel stable-1
  outpost adm upgrade`,
		Args: exactArgs(1, "the channel's name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == "" {
				return usagef("the channel's name is empty")
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			if obj, err := cl.Get(cmd.Context(), clusterVersionResource, "", api.ClusterVersionName, client.GetOptions{}); err == nil {
				if chs := obj.(*api.ClusterVersion).Status.Desired.Channels; len(chs) > 0 && !slices.Contains(chs, args[0]) {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: no channel %s is known for the version the cluster runs (known: %s)\n", args[0], strings.Join(chs, ", "))
				}
			}
			_, wrote, err := updateRaw(cmd.Context(), cl, clusterVersionResource, "", api.ClusterVersionName, func(obj map[string]any) (bool, error) {
				spec := childMap(obj, "spec")
				if spec["channel"] == args[0] {
					return false, nil
				}
				spec["channel"] = args[0]
				return true, nil
			})
			if err != nil {
				return err
			}
			if !wrote {
				fmt.Fprintf(cmd.OutOrStdout(), "the cluster already follows channel %s\n", args[0])
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "channel set to %s: updates are asked of the upstream at once\n", args[0])
			return nil
		},
	}
	up.AddCommand(channel)
	return up
}

// risksToAccept checks --to or --to-image against the updates the
// cluster lists, as oc does: a version not listed is refused, an image
// not listed needs --allow-explicit-upgrade, a not recommended update
// needs --allow-not-recommended and its risks are returned to be
// accepted.
func risksToAccept(cv *api.ClusterVersion, version, image string, allow, explicit bool) ([]string, error) {
	matches := func(r api.Release) bool {
		if image != "" {
			return r.Image == image
		}
		return r.Version == version
	}
	for _, r := range cv.Status.AvailableUpdates {
		if matches(r) {
			return nil, nil
		}
	}
	for _, cu := range cv.Status.ConditionalUpdates {
		if !matches(cu.Release) {
			continue
		}
		version = cu.Release.Version
		if len(cu.Conditions) > 0 && cu.Conditions[0].Status == api.ConditionTrue {
			return nil, nil
		}
		var names []string
		for _, r := range cu.Risks {
			names = append(names, r.Name)
		}
		if !allow {
			msg := ""
			if len(cu.Conditions) > 0 {
				msg = cu.Conditions[0].Message
			}
			return nil, fmt.Errorf("the update to %s is not recommended for this cluster: %s\nto take it anyway, accepting its risks (%s), add --allow-not-recommended", version, msg, strings.Join(names, ", "))
		}
		return names, nil
	}
	if image != "" {
		if !explicit {
			return nil, fmt.Errorf("the payload %s is not among the updates listed for this cluster; to take it anyway (its signature is still verified), add --allow-explicit-upgrade", image)
		}
		return nil, nil
	}
	var listed []string
	for _, r := range cv.Status.AvailableUpdates {
		listed = append(listed, r.Version)
	}
	for _, cu := range cv.Status.ConditionalUpdates {
		listed = append(listed, cu.Release.Version)
	}
	return nil, fmt.Errorf("version %s is not an update this cluster may take (listed: %s); name a payload with --to-image instead", version, orNone(strings.Join(listed, ", ")))
}

func cvCond(cv *api.ClusterVersion, typ string) api.MachineCondition {
	for _, c := range cv.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return api.MachineCondition{}
}

// printUpgrade writes what oc adm upgrade writes, in its words where
// they fit.
func printUpgrade(w io.Writer, cv *api.ClusterVersion, notRecommended bool) {
	current := cv.Status.Desired.Version
	for _, h := range cv.Status.History {
		if h.State == api.UpdateCompleted {
			current = h.Version
			break
		}
	}
	if p := cvCond(cv, api.CVProgressing); p.Status == api.ConditionTrue {
		fmt.Fprintf(w, "info: An update is in progress. %s\n\n", p.Message)
	}
	if f := cvCond(cv, api.CVFailing); f.Status == api.ConditionTrue {
		fmt.Fprintf(w, "warning: The update is failing: %s: %s\n\n", f.Reason, f.Message)
	}
	fmt.Fprintf(w, "Cluster version is %s\n\n", orNone(current))
	if d := cv.Spec.DesiredUpdate; d != nil {
		want := d.Version
		if want == "" {
			want = d.Image
		}
		switch ra := cvCond(cv, api.CVReleaseAccepted); ra.Status {
		case api.ConditionTrue:
			fmt.Fprintf(w, "info: The update to %s is accepted: %s\n%s\n\n", want, ra.Message, cvCond(cv, api.CVProgressing).Message)
		case api.ConditionFalse:
			fmt.Fprintf(w, "warning: The update to %s is refused:\n  Reason: %s\n  Message: %s\n\n", want, ra.Reason, ra.Message)
		default:
			if want != current {
				fmt.Fprintf(w, "info: An update to %s is requested and being checked.\n\n", want)
			}
		}
	}
	if cv.Spec.Upstream == "" {
		fmt.Fprintln(w, "Upstream is unset: set spec.upstream to an update service (outpost edit clusterversion version).")
	} else {
		fmt.Fprintf(w, "Upstream: %s\n", cv.Spec.Upstream)
	}
	if cv.Spec.Channel == "" {
		fmt.Fprintln(w, "Channel: (unset: outpost adm upgrade channel NAME)")
	} else {
		line := "Channel: " + cv.Spec.Channel
		if chs := cv.Status.Desired.Channels; len(chs) > 0 {
			line += " (available channels: " + strings.Join(chs, ", ") + ")"
		}
		fmt.Fprintln(w, line)
	}
	if r := cvCond(cv, api.CVRetrievedUpdates); r.Status != api.ConditionTrue && r.Reason != "" {
		fmt.Fprintf(w, "\nwarning: Cannot display available updates:\n  Reason: %s\n  Message: %s\n", r.Reason, r.Message)
		if len(cv.Status.AvailableUpdates)+len(cv.Status.ConditionalUpdates) == 0 {
			return
		}
		fmt.Fprintln(w, "\nThe updates retrieved last:")
	}
	recommended := slices.Clone(cv.Status.AvailableUpdates)
	var risky []api.ConditionalUpdateStatus
	for _, cu := range cv.Status.ConditionalUpdates {
		if len(cu.Conditions) > 0 && cu.Conditions[0].Type == api.CVRecommended && cu.Conditions[0].Status == api.ConditionTrue {
			recommended = append(recommended, cu.Release)
		} else {
			risky = append(risky, cu)
		}
	}
	if len(recommended) == 0 && len(risky) == 0 {
		fmt.Fprintln(w, "\nNo updates available. Wait for new updates to be available in the channel.")
		return
	}
	if len(recommended) > 0 {
		fmt.Fprint(w, "\nRecommended updates:\n\n")
		tw := tabwriter.NewWriter(w, 0, 4, 5, ' ', 0)
		fmt.Fprintln(tw, "  VERSION\tIMAGE")
		for _, r := range recommended {
			fmt.Fprintf(tw, "  %s\t%s\n", r.Version, r.Image)
		}
		_ = tw.Flush()
	} else {
		fmt.Fprintln(w, "\nNo updates which are recommended for this cluster are available.")
	}
	if len(risky) == 0 {
		return
	}
	if !notRecommended {
		fmt.Fprintln(w, "\nAdditional updates which are not recommended for your cluster configuration are available, to view those re-run the command with --include-not-recommended.")
		return
	}
	fmt.Fprintln(w, "\nSupported but not recommended updates:")
	for _, cu := range risky {
		c := api.MachineCondition{Status: api.ConditionUnknown}
		if len(cu.Conditions) > 0 {
			c = cu.Conditions[0]
		}
		fmt.Fprintf(w, "\n  Version: %s\n  Image: %s\n  Recommended: %s\n  Reason: %s\n  Message: %s\n", cu.Release.Version, cu.Release.Image, c.Status, c.Reason,
			strings.ReplaceAll(c.Message, "\n", "\n  "))
	}
}
