package cli

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
)

// addRawFlag gives get kubectl's --raw: GET one API path and print the
// reply as it came, for what has no verb (discovery, /healthz,
// metrics.k8s.io). It wraps get's argument check and run, so that get
// itself stays as it is.
func addRawFlag(cmd *cobra.Command, o *options) {
	var raw string
	cmd.Flags().StringVar(&raw, "raw", "", "GET this API path (e.g. /api/v1/namespaces) and print the reply as it is")
	cmd.Example += "\n  outpost get --raw /apis/metrics.k8s.io/v1beta1/nodes"
	args, run := cmd.Args, cmd.RunE
	cmd.Args = func(c *cobra.Command, a []string) error {
		if raw == "" {
			return args(c, a)
		}
		if len(a) > 0 {
			return usagef("arguments may not be passed when --raw is specified")
		}
		return nil
	}
	cmd.RunE = func(c *cobra.Command, a []string) error {
		if raw == "" {
			return run(c, a)
		}
		u, err := url.Parse(raw)
		if err != nil || !strings.HasPrefix(u.Path, "/") || u.Host != "" || u.Scheme != "" {
			return usagef("--raw must be a path starting with /, e.g. /api/v1/namespaces, not %q", raw)
		}
		cl, err := o.client(c)
		if err != nil {
			return err
		}
		data, _, err := cl.Do(c.Context(), http.MethodGet, u.Path, u.Query(), nil)
		if err != nil {
			return err
		}
		w := c.OutOrStdout()
		if _, err := w.Write(data); err != nil {
			return fmt.Errorf("write the reply: %w", err)
		}
		// Like kubectl, end the output with a newline the server's
		// reply may lack, so the shell prompt starts on its own line.
		if len(data) > 0 && data[len(data)-1] != '\n' {
			fmt.Fprintln(w)
		}
		return nil
	}
}
