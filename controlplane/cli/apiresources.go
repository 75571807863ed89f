package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/client"
)

// discoveredResource is one resource of a discovery reply (an
// APIResourceList's entry) with the group version it came from.
type discoveredResource struct {
	Name       string   `json:"name"`
	Namespaced bool     `json:"namespaced"`
	Kind       string   `json:"kind"`
	Verbs      []string `json:"verbs"`
	ShortNames []string `json:"shortNames"`
	apiVersion string
	group      string
}

func newAPIResourcesCommand(o *options) *cobra.Command {
	var (
		output     string
		namespaced bool
		group      string
		noHeaders  bool
		sortBy     string
	)
	cmd := &cobra.Command{
		Use:   "api-resources [--namespaced[=false]] [--api-group=GROUP] [-o wide|name]",
		Short: "List the resource types the server serves",
		Long: "api-resources lists what the server's discovery endpoints (/api/v1 and /apis) say it\n" +
			"serves: each type's name, short names, API version, whether it is namespaced, and\n" +
			"its kind; -o wide adds the verbs. Subresources (pods/status) are not listed.",
		Example: `  outpost api-resources
  outpost api-resources --namespaced=false
  outpost api-resources --api-group=apps -o wide
  outpost api-resources -o name`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case "", outputWide, outputName:
			default:
				return usagef("--output %q is not supported by api-resources: use wide or name", output)
			}
			switch sortBy {
			case "", "name", "kind":
			default:
				return usagef("--sort-by accepts only name or kind")
			}
			var wantNS *bool
			if cmd.Flags().Changed("namespaced") {
				wantNS = &namespaced
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			rs, err := discover(cmd.Context(), cl)
			if err != nil {
				return err
			}
			rs = slices.DeleteFunc(rs, func(r discoveredResource) bool {
				return strings.Contains(r.Name, "/") ||
					(wantNS != nil && r.Namespaced != *wantNS) ||
					(cmd.Flags().Changed("api-group") && r.group != group)
			})
			switch sortBy {
			case "name":
				slices.SortStableFunc(rs, func(a, b discoveredResource) int { return cmp.Compare(a.Name, b.Name) })
			case "kind":
				slices.SortStableFunc(rs, func(a, b discoveredResource) int { return cmp.Compare(a.Kind, b.Kind) })
			}
			w := cmd.OutOrStdout()
			if output == outputName {
				for _, r := range rs {
					if r.group == "" {
						fmt.Fprintln(w, r.Name)
					} else {
						fmt.Fprintln(w, r.Name+"."+r.group)
					}
				}
				return nil
			}
			header := []string{"NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"}
			if output == outputWide {
				header = append(header, "VERBS")
			}
			rows := make([][]string, 0, len(rs))
			for _, r := range rs {
				row := []string{r.Name, strings.Join(r.ShortNames, ","), r.apiVersion, strconv.FormatBool(r.Namespaced), r.Kind}
				if output == outputWide {
					row = append(row, "["+strings.Join(r.Verbs, " ")+"]")
				}
				rows = append(rows, row)
			}
			t := newTable(header)
			if noHeaders {
				t.headed = true
			}
			return t.print(w, rows)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "", "wide (add the verbs) or name")
	// A bool as kubectl's (--namespaced alone means true), but filtering
	// only when given: without it every type is listed.
	f.BoolVar(&namespaced, "namespaced", false, "list only namespaced types (--namespaced) or only cluster-scoped ones (--namespaced=false); all when not given")
	f.StringVar(&group, "api-group", "", "list only the types of this API group (\"\" is the core group)")
	f.BoolVar(&noHeaders, "no-headers", false, "print no header line")
	f.StringVar(&sortBy, "sort-by", "", "sort by name or kind (default: the server's order, core group first)")
	return cmd
}

// discover reads the server's discovery documents: the core group's
// resources, the groups, and each group's preferred version's resources.
func discover(ctx context.Context, cl *client.Client) ([]discoveredResource, error) {
	core, err := resourceList(ctx, cl, "/api/v1", "", "v1")
	if err != nil {
		return nil, err
	}
	data, _, err := cl.Do(ctx, http.MethodGet, "/apis", nil, nil)
	if err != nil {
		return nil, err
	}
	var groups struct {
		Groups []struct {
			Name             string `json:"name"`
			PreferredVersion struct {
				GroupVersion string `json:"groupVersion"`
			} `json:"preferredVersion"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(data, &groups); err != nil {
		return nil, fmt.Errorf("%w: /apis: %w", errBadJSON, err)
	}
	out := core
	for _, g := range groups.Groups {
		gv := g.PreferredVersion.GroupVersion
		rs, err := resourceList(ctx, cl, "/apis/"+gv, g.Name, gv)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

func resourceList(ctx context.Context, cl *client.Client, path, group, gv string) ([]discoveredResource, error) {
	data, _, err := cl.Do(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return nil, err
	}
	var l struct {
		Resources []discoveredResource `json:"resources"`
	}
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errBadJSON, path, err)
	}
	for i := range l.Resources {
		l.Resources[i].apiVersion, l.Resources[i].group = gv, group
	}
	return l.Resources, nil
}
