package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/pki"
)

// addAdmCommands adds the adm subcommands that need no server.
func addAdmCommands(root *cobra.Command) {
	var adm *cobra.Command
	for _, c := range root.Commands() {
		if c.Name() == "adm" {
			adm = c
		}
	}
	if adm == nil {
		adm = &cobra.Command{Use: "adm", Short: "Cluster administration"}
		root.AddCommand(adm)
	}
	adm.AddCommand(&cobra.Command{
		Use:   "secret",
		Short: "Print a new random cluster secret",
		Long: `Print a new random cluster secret for "outpost server --cluster-secret".
Every server of one cluster needs the same secret: the cluster CA and the
admin token are derived from it. Keep it as safe as the CA's private key.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), pki.GenerateSecret())
			return err
		},
	})
}
