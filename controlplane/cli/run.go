package cli

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
)

func newRunCommand(o *options) *cobra.Command {
	var (
		image      string
		port       int32
		env        []string
		labels     string
		restart    string
		pullPolicy string
		command    bool
		g          generateFlags
		attach     bool
		rm         bool
		tty        bool
	)
	cmd := &cobra.Command{
		Use:   "run NAME --image=IMAGE [--port=PORT] [--env=K=V...] [--labels=K=V,...] [--restart=Always|OnFailure|Never] [--command] [-- ARG...]",
		Short: "Run an image in a new pod",
		Long: "run creates a pod named NAME with one container, also named NAME, running IMAGE; it is\n" +
			"labelled run=NAME unless --labels says otherwise. What follows -- becomes the\n" +
			"container's args, or with --command its command. --dry-run=client -o yaml prints the\n" +
			"pod instead. There is no -i, -t, --attach or --rm: follow the pod with `outpost logs`.",
		Example: `  outpost run web --image=registry.local/web:1.2 --port=8080
  outpost run once --image=busybox --restart=Never -- echo hello
  outpost run sh --image=busybox --command -- sleep 3600
  outpost run web --image=web:1.2 --env=MODE=test --labels=app=web,tier=front --dry-run=client -o yaml`,
		Args: minArgs(1, "the name of the pod, e.g. `outpost run web --image=web:1.2`"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if attach || rm || tty {
				return usagef("outpost run does not attach to the pod (no -i, -t, --attach or --rm): run it, then follow it with `outpost logs -f POD`")
			}
			dash := cmd.ArgsLenAtDash()
			if dash > 1 || (dash < 0 && len(args) > 1) {
				return usagef("expected one NAME, then -- before the container's arguments")
			}
			if err := g.check(); err != nil {
				return err
			}
			if image == "" {
				return usagef("--image is required: the image of the pod's container")
			}
			switch restart {
			case api.RestartPolicyAlways, api.RestartPolicyOnFailure, api.RestartPolicyNever:
			default:
				return usagef("invalid --restart %q: use Always, OnFailure or Never", restart)
			}
			if port < 0 || port > 65535 {
				return usagef("--port must be between 1 and 65535")
			}
			name := args[0]
			podLabels := map[string]any{"run": name}
			if labels != "" {
				podLabels = map[string]any{}
				for kv := range strings.SplitSeq(labels, ",") {
					k, v, ok := strings.Cut(kv, "=")
					if !ok || k == "" {
						return usagef("invalid --labels %q: use KEY=VALUE,KEY=VALUE", labels)
					}
					podLabels[k] = v
				}
			}
			c := map[string]any{"name": name, "image": image}
			if rest := args[1:]; len(rest) > 0 {
				if command {
					c["command"] = toAny(rest)
				} else {
					c["args"] = toAny(rest)
				}
			} else if command {
				return usagef("--command needs the command after --, e.g. `--command -- sleep 3600`")
			}
			if port > 0 {
				c["ports"] = []any{map[string]any{"containerPort": port}}
			}
			if len(env) > 0 {
				vars := make([]any, 0, len(env))
				for _, e := range env {
					k, v, ok := strings.Cut(e, "=")
					if !ok || k == "" {
						return usagef("invalid --env %q: use NAME=VALUE", e)
					}
					vars = append(vars, map[string]any{"name": k, "value": v})
				}
				c["env"] = vars
			}
			if pullPolicy != "" {
				c["imagePullPolicy"] = pullPolicy
			}
			obj := map[string]any{
				"apiVersion": podResource.APIVersion(),
				"kind":       podResource.Kind,
				"metadata":   map[string]any{"name": name, "labels": podLabels},
				"spec": map[string]any{
					"containers":    []any{c},
					"restartPolicy": restart,
				},
			}
			return createGenerated(cmd, o, obj, &g)
		},
	}
	f := cmd.Flags()
	f.StringVar(&image, "image", "", "the image to run (required)")
	f.Int32Var(&port, "port", 0, "the port the container listens on (containerPort)")
	f.StringArrayVar(&env, "env", nil, "an environment variable, NAME=VALUE (repeatable)")
	f.StringVarP(&labels, "labels", "l", "", "the pod's labels, KEY=VALUE,KEY=VALUE (default run=NAME)")
	f.StringVar(&restart, "restart", api.RestartPolicyAlways, "the pod's restart policy: Always, OnFailure or Never")
	f.StringVar(&pullPolicy, "image-pull-policy", "", "Always, IfNotPresent or Never (default: the server's)")
	f.BoolVar(&command, "command", false, "what follows -- is the command, not the image's command's arguments")
	addGenerateFlags(cmd, &g)
	// Accepted only to refuse them with the reason: kubectl users type
	// `run -it --rm`.
	f.BoolVarP(&attach, "stdin", "i", false, "not supported")
	f.BoolVarP(&tty, "tty", "t", false, "not supported")
	f.BoolVar(&rm, "rm", false, "not supported")
	f.BoolVar(&attach, "attach", false, "not supported")
	for _, n := range []string{"stdin", "tty", "rm", "attach"} {
		_ = f.MarkHidden(n)
	}
	return cmd
}

// toAny turns strings into JSON array elements.
func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return slices.Clip(out)
}
