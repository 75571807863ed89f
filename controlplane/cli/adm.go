package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/client"
)

func newAdmCommand(o *options) *cobra.Command {
	adm := &cobra.Command{
		Use:   "adm",
		Short: "Cluster administration: tokens, raft membership, node placement, scheduler policies, node updates, releases",
	}
	adm.AddCommand(newTokenCommand(o), newRaftCommand(o), newTaintCommand(o),
		newCordonCommand(o, true), newCordonCommand(o, false), newDrainCommand(o), newSchedulerCommand(),
		newUpgradeCommand(o), newFleetLockCommand(o), newReleaseCommand(), newBinaryCommand())
	return adm
}

func newTokenCommand(o *options) *cobra.Command {
	tok := &cobra.Command{
		Use:   "token",
		Short: "Create, list and delete bearer tokens",
	}
	var (
		role        string
		namespaces  []string
		node        string
		ttl         time.Duration
		description string
	)
	create := &cobra.Command{
		Use:   "create --role cluster-admin|node|developer|fleetlock",
		Short: "Create a token and print it; the secret is shown only this once",
		Long: "create makes a token here and stores only the hash of its secret in the cluster, so the\n" +
			"secret never crosses the network. It prints the token, <id>.<secret>, on standard output.\n" +
			"A node token without --node is a join token: it prints a join string, OP1::<CA pin>::<token>,\n" +
			"for `outpost agent --token`, so the agent can trust the cluster CA without a copy of it.\n" +
			"A developer token is limited to the namespaces of -n/--namespace (repeatable) and\n" +
			"--namespaces; they need not exist yet.",
		Example: `  outpost adm token create --role developer -n team-a --ttl 720h
  outpost adm token create --role developer --namespaces team-a,team-b
  outpost adm token create --role node --ttl 1h --description "join edge-7"
  outpost adm token create --role node --node edge-7
  outpost adm token create --role fleetlock --description "zincati, site 3"`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			all := tokenNamespaces(o.namespaces, namespaces)
			spec, err := tokenSpec(role, all, node, ttl, description, o.now())
			if err != nil {
				return err
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			id, secret := auth.NewToken()
			spec.SecretHash = auth.HashSecret(secret)
			t := &api.Token{ObjectMeta: api.ObjectMeta{Name: id}, Spec: spec}
			if _, err := cl.CreateToken(cmd.Context(), t); err != nil {
				return err
			}
			tokStr := id + "." + secret
			if spec.Role == api.RoleNode && spec.NodeName == "" {
				// A join token goes to an agent that has no CA yet: the
				// join string carries the CA's pin.
				pin, err := cl.CAPin()
				if err != nil {
					printWarning(cmd.ErrOrStderr(), "printing the bare token: "+err.Error()+"; give the agent --ca-cert")
				} else {
					tokStr = auth.FormatJoin(pin, tokStr)
				}
			}
			fmt.Fprintln(cmd.OutOrStdout(), tokStr)
			warnMissingNamespaces(cmd.Context(), cl, all, cmd.ErrOrStderr())
			return nil
		},
	}
	f := create.Flags()
	f.StringVar(&role, "role", "", "cluster-admin, node, developer, or fleetlock (only FleetLock's reboot locks: the token of a self-updating host's base_url)")
	f.StringSliceVar(&namespaces, "namespaces", nil, "for a developer token: the namespaces it may use, comma-separated (with those of -n)")
	f.StringVar(&node, "node", "", "for a node token: the node it is bound to (without it, a join token)")
	f.DurationVar(&ttl, "ttl", 24*time.Hour, "how long the token is valid; 0 for ever")
	f.StringVar(&description, "description", "", "a note on what the token is for")

	tokens := api.ResourceForKind("Token")
	list := &cobra.Command{
		Use:   "list",
		Short: "List tokens (without their secrets, which the cluster does not have)",
		Example: `  outpost adm token list
  outpost get tokens -o wide`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			objs, _, err := cl.List(cmd.Context(), tokens, "", client.ListOptions{})
			if err != nil {
				return err
			}
			if len(objs) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "No resources found")
				return nil
			}
			p := printOptions{now: o.now()}
			return newTableFor(tokens, p).print(cmd.OutOrStdout(), rowsFor(tokens, objs, p))
		},
	}
	del := &cobra.Command{
		Use:   "delete ID...",
		Short: "Delete tokens; their holders can no longer authenticate",
		Example: `  outpost adm token list
  outpost adm token delete abcdef
  outpost adm token delete abcdef x7k2q9`,
		Args: minArgs(1, "the ID of the token to delete"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			failed := false
			for _, id := range args {
				if _, err := cl.Delete(cmd.Context(), tokens, "", id, nil); err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), FormatError(err))
					failed = true
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "token %q deleted\n", id)
			}
			if failed {
				return errReported
			}
			return nil
		},
	}
	rotate := &cobra.Command{
		Use:   "rotate-admin",
		Short: "Rotate the built-in admin token: the old one stops working on every server",
		Long: "rotate-admin moves the cluster-admin token derived from the cluster secret to its next\n" +
			"generation. The previous token, and every admin.conf and client configuration holding it,\n" +
			"stops working on each server as it applies the change; every server rewrites its own\n" +
			"admin.conf with the new token. Use it when an admin.conf or the admin token leaked.\n\n" +
			"The client configuration this command used is rewritten with the new token when it held\n" +
			"the old one; otherwise (--token) the new token is printed on standard output.\n\n" +
			"Whoever held the old token may have made other tokens: list them with `outpost adm token list`\n" +
			"and delete the cluster-admin tokens you do not know. Rotation does not help when the cluster\n" +
			"secret itself leaked: it derives every generation.",
		Example: `  outpost adm token rotate-admin
  outpost --config /etc/outpost/admin.conf adm token rotate-admin`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return rotateAdminToken(cmd, o)
		},
	}
	tok.AddCommand(create, list, del, rotate)
	return tok
}

// sameTokenID reports whether tokens a and b have the same id.
func sameTokenID(a, b string) bool {
	ida, _, erra := auth.ParseToken(a)
	idb, _, errb := auth.ParseToken(b)
	return erra == nil && errb == nil && ida == idb
}

// rotateAdminToken asks the cluster to rotate the admin token, then puts
// the new token where the old one was used from.
func rotateAdminToken(cmd *cobra.Command, o *options) error {
	cl, err := o.client(cmd)
	if err != nil {
		return err
	}
	body, _, err := cl.Do(cmd.Context(), http.MethodPost, "/apis/outpost.io/v1/admintoken/rotate", nil, nil)
	if err != nil {
		return err
	}
	var rot api.AdminTokenRotation
	if err := api.Unmarshal(body, &rot); err != nil {
		return fmt.Errorf("the server's reply to the rotation cannot be read (the rotation may have happened: see admin.conf on a server): %w", err)
	}
	if rot.Token == "" {
		return errors.New("the server's reply to the rotation holds no token (the rotation may have happened: see admin.conf on a server)")
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "admin token rotated to generation %d; the previous one no longer works. Each server rewrites its admin.conf with the new one.\n", rot.Generation)
	path := o.configPath
	if path == "" {
		path = client.DefaultConfigPath()
	}
	// The file as it is, without the environment's server and token: only
	// its own token is replaced, and only when that is what was used.
	cfg, lerr := client.LoadConfigFile(path)
	switch {
	case o.token != "" || os.Getenv(client.EnvToken) != "" || lerr != nil || !sameTokenID(cfg.Token, rot.Token):
		// The token came from elsewhere: the caller must see the new one.
	case cfg.Token == rot.Token:
		fmt.Fprintf(out, "%s holds the new token already (a server rewrote it).\n", path)
		return nil
	default:
		cfg.Token = rot.Token
		if err := client.WriteConfig(path, cfg); err != nil {
			fmt.Fprintln(out, rot.Token)
			return fmt.Errorf("writing the new token to %s: %w (it is printed above)", path, err)
		}
		fmt.Fprintf(out, "%s now holds the new token.\n", path)
		return nil
	}
	fmt.Fprintln(out, rot.Token)
	return nil
}

// tokenNamespaces merges the namespaces of -n (every time it was given)
// and --namespaces, without repeats, in the order given.
func tokenNamespaces(flagNS, listed []string) []string {
	var out []string
	for _, ns := range slices.Concat(flagNS, listed) {
		if ns = strings.TrimSpace(ns); ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

// warnMissingNamespaces warns about the namespaces of a new token that do
// not exist. The token is valid for them anyway (they may be created
// later), but a typo would otherwise only show when the token is refused.
// Failing to check is not worth a word: the token was created.
func warnMissingNamespaces(ctx context.Context, cl *client.Client, namespaces []string, stderr io.Writer) {
	nsR := api.ResourceForKind("Namespace")
	for _, ns := range namespaces {
		if _, err := cl.Get(ctx, nsR, "", ns, client.GetOptions{}); api.IsNotFound(err) {
			printWarning(stderr, fmt.Sprintf("namespace %q does not exist; the token will be valid in it once it is created", ns))
		}
	}
}

// tokenSpec checks the flags of `adm token create` and builds the spec
// (without the secret hash).
func tokenSpec(role string, namespaces []string, node string, ttl time.Duration, description string, now time.Time) (api.TokenSpec, error) {
	switch role {
	case api.RoleClusterAdmin, api.RoleNode, api.RoleDeveloper, api.RoleFleetLock:
	case "":
		return api.TokenSpec{}, usagef("--role is required: cluster-admin, node, developer or fleetlock")
	default:
		return api.TokenSpec{}, usagef("--role %q is not one of cluster-admin, node, developer, fleetlock", role)
	}
	if len(namespaces) > 0 && role != api.RoleDeveloper {
		return api.TokenSpec{}, usagef("--namespace applies to developer tokens only")
	}
	if role == api.RoleDeveloper && len(namespaces) == 0 {
		return api.TokenSpec{}, usagef("a developer token needs at least one --namespace (-n NAMESPACE, repeatable, or --namespaces A,B)")
	}
	if node != "" && role != api.RoleNode {
		return api.TokenSpec{}, usagef("--node applies to node tokens only")
	}
	if ttl < 0 {
		return api.TokenSpec{}, usagef("--ttl must not be negative")
	}
	spec := api.TokenSpec{Role: role, Namespaces: namespaces, NodeName: node, Description: description}
	if ttl > 0 {
		spec.Expires = api.NewTime(now.Add(ttl))
	}
	return spec, nil
}

func newRaftCommand(o *options) *cobra.Command {
	raft := &cobra.Command{
		Use:   "raft",
		Short: "Inspect and change the control plane's raft membership",
	}
	list := &cobra.Command{
		Use:     "list-peers",
		Short:   "List the raft members, their roles and whether they are reachable",
		Example: `  outpost adm raft list-peers`,
		Args:    exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			peers, err := cl.RaftPeers(cmd.Context())
			if err != nil {
				return err
			}
			// Each member's machine (named as the server, by the host's
			// name) and its failure domain; without them, the columns
			// say <none>.
			machines := map[string]*api.Machine{}
			if objs, _, err := cl.List(cmd.Context(), api.ResourceForKind("Machine"), "", client.ListOptions{}); err == nil {
				for _, o := range objs {
					machines[o.GetObjectMeta().Name] = o.(*api.Machine)
				}
			}
			return printPeers(cmd, peers, machines)
		},
	}
	change := func(verb, done, short string, fn func(ctx context.Context, cl *client.Client, id string) error) *cobra.Command {
		return &cobra.Command{
			Use:   verb + " ID",
			Short: short,
			// The IDs of raft peers are the servers' names.
			Example: "  outpost adm raft list-peers\n  outpost adm raft " + verb + " server-3",
			Args:    exactArgs(1, "the ID of a raft peer (see `outpost adm raft list-peers`)"),
			RunE: func(cmd *cobra.Command, args []string) error {
				cl, err := o.client(cmd)
				if err != nil {
					return err
				}
				if err := fn(cmd.Context(), cl, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "peer %q %s\n", args[0], done)
				return nil
			},
		}
	}
	raft.AddCommand(list,
		change("promote", "promoted", "Make a caught-up non-voter a voter", func(ctx context.Context, cl *client.Client, id string) error {
			return cl.RaftPromote(ctx, id)
		}),
		change("demote", "demoted", "Make a voter a non-voter, if quorum survives it", func(ctx context.Context, cl *client.Client, id string) error {
			return cl.RaftDemote(ctx, id)
		}),
		change("remove-peer", "removed", "Remove a member from raft, if quorum survives it", func(ctx context.Context, cl *client.Client, id string) error {
			return cl.RaftRemove(ctx, id)
		}),
	)
	return raft
}

// printPeers writes the raft peer table; an unreachable peer's error goes
// in a last column when there is one.
func printPeers(cmd *cobra.Command, peers []client.RaftPeer, machines map[string]*api.Machine) error {
	header := []string{"ID", "ADDRESS", "SUFFRAGE", "LEADER", "LAST-INDEX", "REACHABLE", "MACHINE", "DOMAIN"}
	withErr := false
	for _, p := range peers {
		withErr = withErr || p.Error != ""
	}
	if withErr {
		header = append(header, "ERROR")
	}
	rows := make([][]string, 0, len(peers))
	for _, p := range peers {
		machine, domain := none, none
		if m := machines[p.ID]; m != nil {
			machine, domain = m.Name, orNone(m.Labels["machine.openshift.io/zone"])
			if m.DeletionTimestamp != nil {
				machine += " (deleting)"
			}
		}
		row := []string{p.ID, p.Address, p.Suffrage, strconv.FormatBool(p.Leader), strconv.FormatUint(p.LastIndex, 10), strconv.FormatBool(p.Reachable), machine, domain}
		if withErr {
			row = append(row, p.Error)
		}
		rows = append(rows, row)
	}
	return newTable(header).print(cmd.OutOrStdout(), rows)
}
