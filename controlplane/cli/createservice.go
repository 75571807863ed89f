package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
)

var serviceResource = api.ResourceForKind("Service")

// newCreateServiceCommand is kubectl's `create service`: a subcommand per
// type, each building a service selecting app=NAME (the label `create
// deployment` gives its pods), created through the path of `create -f`.
func newCreateServiceCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "service clusterip|nodeport|loadbalancer|externalname NAME ...",
		Aliases: []string{"svc"},
		Short:   "Create a service of the given type",
		Example: `  outpost create service clusterip web --tcp=80:8080
  outpost create service nodeport web --tcp=80:8080 --node-port=30080
  outpost create service externalname mail --external-name=mail.example.com`,
	}
	cmd.AddCommand(
		newCreateServiceTypeCommand(o, api.ServiceTypeClusterIP, "clusterip"),
		newCreateServiceTypeCommand(o, api.ServiceTypeNodePort, "nodeport"),
		newCreateServiceTypeCommand(o, api.ServiceTypeLoadBalancer, "loadbalancer"),
		newCreateServiceTypeCommand(o, api.ServiceTypeExternalName, "externalname"),
	)
	return cmd
}

func newCreateServiceTypeCommand(o *options, typ, verb string) *cobra.Command {
	var (
		tcp          []string
		clusterIP    string
		nodePort     int32
		externalName string
		g            generateFlags
	)
	use := verb + " NAME --tcp=PORT[:TARGET]..."
	example := fmt.Sprintf("  outpost create service %[1]s web --tcp=80:8080\n  outpost create service %[1]s web --tcp=80 --tcp=443:8443 --dry-run=client -o yaml", verb)
	if typ == api.ServiceTypeExternalName {
		use = verb + " NAME --external-name=HOST [--tcp=PORT[:TARGET]...]"
		example = "  outpost create service externalname mail --external-name=mail.example.com"
	}
	cmd := &cobra.Command{
		Use:     use,
		Short:   "Create a " + typ + " service",
		Example: example,
		Args:    exactArgs(1, "the name of the service"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.check(); err != nil {
				return err
			}
			name := args[0]
			var problems []string
			ports, err := parseServicePorts(tcp)
			if err != nil {
				problems = append(problems, err.Error())
			}
			spec := map[string]any{"type": typ}
			switch typ {
			case api.ServiceTypeExternalName:
				if externalName == "" {
					problems = append(problems, "--external-name is required: the host name the service points at")
				}
				spec["externalName"] = externalName
			default:
				// A headless service (--clusterip=None) needs no port;
				// any other does, as in kubectl.
				if len(ports) == 0 && clusterIP != "None" && err == nil {
					problems = append(problems, "at least one --tcp=PORT[:TARGET] is required")
				}
				spec["selector"] = map[string]any{"app": name}
			}
			if clusterIP != "" {
				spec["clusterIP"] = clusterIP
			}
			if nodePort != 0 {
				if nodePort < 0 || nodePort > 65535 {
					problems = append(problems, "--node-port must be between 1 and 65535")
				}
				if len(ports) != 1 {
					problems = append(problems, "--node-port needs exactly one --tcp port")
				} else {
					ports[0].(map[string]any)["nodePort"] = nodePort
				}
			}
			if len(problems) > 0 {
				return usagef("%s", strings.Join(problems, "; "))
			}
			if len(ports) > 0 {
				spec["ports"] = ports
			}
			obj := map[string]any{
				"apiVersion": serviceResource.APIVersion(),
				"kind":       serviceResource.Kind,
				"metadata":   map[string]any{"name": name, "labels": map[string]any{"app": name}},
				"spec":       spec,
			}
			return createGenerated(cmd, o, obj, &g)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&tcp, "tcp", nil, "a port and the pods' port it forwards to, PORT[:TARGET] (repeatable; TARGET defaults to PORT and may be a port name)")
	if typ != api.ServiceTypeExternalName {
		f.StringVar(&clusterIP, "clusterip", "", "the cluster IP to ask for; None makes a headless service")
	}
	if typ == api.ServiceTypeNodePort {
		f.Int32Var(&nodePort, "node-port", 0, "the port on every node (default: one the server picks)")
	}
	if typ == api.ServiceTypeExternalName {
		f.StringVar(&externalName, "external-name", "", "the host name the service is a CNAME of")
	}
	addGenerateFlags(cmd, &g)
	return cmd
}

// errBadPort is a --tcp value that is not PORT[:TARGET].
var errBadPort = errors.New("invalid --tcp")

// parseServicePorts reads --tcp values as kubectl does: each port is
// named "PORT-TARGET" so that several can coexist.
func parseServicePorts(values []string) ([]any, error) {
	var ports []any
	var problems []string
	for _, v := range values {
		p, t, hasTarget := strings.Cut(v, ":")
		port, err := strconv.Atoi(p)
		if err != nil || port < 1 || port > 65535 {
			problems = append(problems, fmt.Sprintf("%q: the port must be a number between 1 and 65535", v))
			continue
		}
		if !hasTarget {
			t = p
		}
		var target any = t
		if n, err := strconv.Atoi(t); err == nil {
			if n < 1 || n > 65535 {
				problems = append(problems, fmt.Sprintf("%q: the target port must be between 1 and 65535", v))
				continue
			}
			target = n
		} else if t == "" {
			problems = append(problems, fmt.Sprintf("%q: the target port is empty", v))
			continue
		}
		ports = append(ports, map[string]any{
			"name": p + "-" + t, "protocol": "TCP", "port": port, "targetPort": target,
		})
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w %s", errBadPort, strings.Join(problems, ", "))
	}
	return ports, nil
}
