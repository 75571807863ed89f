package cli

import (
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/version"
)

// versionInfo is one side of `version -o json|yaml`, under kubectl's
// field names so that scripts reading .clientVersion.gitVersion work.
type versionInfo struct {
	GitVersion string `json:"gitVersion"`
	GoVersion  string `json:"goVersion,omitempty"`
	Platform   string `json:"platform,omitempty"`
}

func newVersionCommand(o *options) *cobra.Command {
	var (
		clientOnly bool
		output     string
	)
	cmd := &cobra.Command{
		Use:   "version [--client] [-o json|yaml]",
		Short: "Print the client's and the server's version",
		Long: "version prints this binary's version, then asks the server for its own. --client\n" +
			"prints only the client's, without a server (as kubectl's).",
		Example: `  outpost version
  outpost version --client
  outpost version -o json
  outpost version --server https://10.0.0.1:6443`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != outputJSON && output != outputYAML {
				return usagef("--output must be json or yaml, not %q", output)
			}
			out := cmd.OutOrStdout()
			doc := struct {
				Client versionInfo  `json:"clientVersion"`
				Server *versionInfo `json:"serverVersion,omitempty"`
			}{Client: versionInfo{GitVersion: version.Version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}}
			if output == "" {
				fmt.Fprintf(out, "Client Version: %s\n", version.Version)
			}
			if !clientOnly {
				cl, err := o.client(cmd)
				if err != nil {
					return err
				}
				v, err := cl.Version(cmd.Context())
				if err != nil {
					return err
				}
				doc.Server = &versionInfo{GitVersion: v.Version}
				if output == "" {
					fmt.Fprintf(out, "Server Version: %s\n", v.Version)
				}
			}
			if output == "" {
				return nil
			}
			data, err := json.Marshal(doc)
			if err != nil {
				return fmt.Errorf("encode the versions: %w", err)
			}
			return printRaw(out, output, data)
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print only the client's version; do not ask the server")
	cmd.Flags().StringVarP(&output, "output", "o", "", "print the versions as json or yaml")
	return cmd
}
