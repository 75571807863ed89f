package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
)

// generateFlags are the flags of the verbs that build an object from
// flags (create deployment, run): --dry-run and -o, as kubectl's.
type generateFlags struct {
	dryRun string
	output string
}

func addGenerateFlags(cmd *cobra.Command, g *generateFlags) {
	cmd.Flags().StringVar(&g.dryRun, "dry-run", "none", "client: print the object without creating it (with -o yaml: a manifest to edit); none: create it")
	cmd.Flags().StringVarP(&g.output, "output", "o", "", "print the object as json or yaml, or its name")
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "client"
}

// check refuses values the verbs do not take. outpost's API has no
// server-side dry run, so --dry-run=server is refused rather than
// creating the object.
func (g *generateFlags) check() error {
	switch g.dryRun {
	case "none", "client":
	case "server":
		return usagef("--dry-run=server is not supported: outpost's API has no server-side dry run; use --dry-run=client")
	default:
		return usagef("invalid --dry-run %q: use none or client", g.dryRun)
	}
	switch g.output {
	case "", outputJSON, outputYAML, outputName:
		return nil
	}
	return usagef("--output %q is not supported here: use json, yaml or name", g.output)
}

// createGenerated creates an object a verb built from its flags, through
// the same path as `create -f`, and prints it as -o asks; with
// --dry-run=client it only prints it, needing no server.
func createGenerated(cmd *cobra.Command, o *options, obj map[string]any, g *generateFlags) error {
	if o.namespace != "" {
		childMap(obj, "metadata")["namespace"] = o.namespace
	}
	m, err := newManifest("the command line", obj)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if g.dryRun == "client" {
		switch g.output {
		case outputJSON, outputYAML:
			doc, err := json.Marshal(obj)
			if err != nil {
				return fmt.Errorf("encode %s: %w", m.ref(), err)
			}
			return printRaw(w, g.output, doc)
		case outputName:
			fmt.Fprintln(w, m.ref())
		default:
			fmt.Fprintf(w, "%s created (dry run)\n", m.ref())
		}
		return nil
	}
	cl, err := o.client(cmd)
	if err != nil {
		return err
	}
	name, err := createManifest(cmd.Context(), cl, &m, o.namespace)
	if err != nil {
		return err
	}
	switch g.output {
	case outputJSON, outputYAML:
		// The object as stored, with what the server defaulted.
		data, _, err := cl.Do(cmd.Context(), http.MethodGet, rawPath(m.r, cl.Namespace(), name), url.Values{"consistent": {"true"}}, nil)
		if err != nil {
			return err
		}
		return printRaw(w, g.output, withTypeMeta(m.r, data))
	case outputName:
		fmt.Fprintln(w, refName(m.r, name))
	default:
		fmt.Fprintf(w, "%s created\n", refName(m.r, name))
	}
	return nil
}

func newCreateDeploymentCommand(o *options) *cobra.Command {
	var (
		images   []string
		replicas int32
		port     int32
		g        generateFlags
	)
	cmd := &cobra.Command{
		Use:     "deployment NAME --image=IMAGE [--image=IMAGE...] [--replicas=N] [--port=PORT]",
		Aliases: []string{"deploy"},
		Short:   "Create a deployment running the given images",
		Long: "create deployment makes a deployment labelled app=NAME whose pods run one container per\n" +
			"--image, each named after its image. --dry-run=client -o yaml prints it instead, as a\n" +
			"manifest to edit and apply.",
		Example: `  outpost create deployment web --image=registry.local/web:1.2
  outpost create deployment web --image=web:1.2 --replicas=3 --port=8080
  outpost create deployment web --image=web:1.2 --dry-run=client -o yaml > web.yaml`,
		Args: exactArgs(1, "the name of the deployment"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.check(); err != nil {
				return err
			}
			if len(images) == 0 {
				return usagef("--image is required: the image of the deployment's container")
			}
			if replicas < 0 {
				return usagef("--replicas must be 0 or more")
			}
			if port < 0 || port > 65535 {
				return usagef("--port must be between 1 and 65535")
			}
			name := args[0]
			labels := map[string]any{"app": name}
			containers := make([]any, 0, len(images))
			for _, img := range images {
				c := map[string]any{"name": containerNameFor(img), "image": img}
				if port > 0 {
					c["ports"] = []any{map[string]any{"containerPort": port}}
				}
				containers = append(containers, c)
			}
			obj := map[string]any{
				"apiVersion": deploymentResource.APIVersion(),
				"kind":       deploymentResource.Kind,
				"metadata":   map[string]any{"name": name, "labels": labels},
				"spec": map[string]any{
					"replicas": replicas,
					"selector": map[string]any{"matchLabels": labels},
					"template": map[string]any{
						"metadata": map[string]any{"labels": labels},
						"spec":     map[string]any{"containers": containers},
					},
				},
			}
			return createGenerated(cmd, o, obj, &g)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&images, "image", nil, "the image of a container (repeatable: one container per image)")
	f.Int32Var(&replicas, "replicas", 1, "the number of pods")
	f.Int32Var(&port, "port", 0, "the port the containers listen on (containerPort)")
	addGenerateFlags(cmd, &g)
	return cmd
}

// containerNameFor names a container after its image, as kubectl does:
// the last path element without tag or digest, made a DNS label
// ("registry.local:5000/team/web:1.2" gives "web").
func containerNameFor(image string) string {
	image, _, _ = strings.Cut(image, "@")
	if i := strings.LastIndexByte(image, '/'); i >= 0 {
		image = image[i+1:]
	}
	image, _, _ = strings.Cut(image, ":")
	var b strings.Builder
	for _, c := range strings.ToLower(image) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteRune(c)
		} else {
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-")
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-")
	}
	if name == "" {
		return "app"
	}
	return name
}
