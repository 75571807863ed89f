package cli

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// errNoField is an explain path naming a field the kind does not have.
var errNoField = errors.New("does not exist")

func newExplainCommand(o *options) *cobra.Command {
	var recursive bool
	cmd := &cobra.Command{
		Use:   "explain TYPE[.FIELD[.FIELD...]] [--recursive]",
		Short: "Show the fields of a kind, or of one of its fields, with their types",
		Long: "explain lists the fields a manifest of a kind may hold, read from the same schema\n" +
			"the API's strict decoder checks manifests against: the fields outpost acts on, with\n" +
			"their types, and the Kubernetes fields it accepts with a warning and drops (shown as\n" +
			"<ignored>). A field of any other name is refused by the API. Lists and maps are\n" +
			"explained by their elements: `pod.spec.containers` lists a container's fields.",
		Example: `  outpost explain pods
  outpost explain deployment.spec.template
  outpost explain pod.spec.containers.resources
  outpost explain svc --recursive`,
		Args: exactArgs(1, "one TYPE[.FIELD...], e.g. `outpost explain pod.spec`"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return explain(cmd.OutOrStdout(), args[0], recursive)
		},
	}
	cmd.Flags().BoolVar(&recursive, "recursive", false, "list the fields of fields too, as a tree, without descriptions")
	return cmd
}

// explain prints what `explain path` shows: the kind, the field the path
// names (if any) with its type, its description and its own fields.
func explain(w io.Writer, path string, recursive bool) error {
	typ, rest, _ := strings.Cut(path, ".")
	r, err := resourceFor(typ)
	if err != nil {
		return err
	}
	t := reflect.TypeOf(r.New()).Elem()
	owner, field := t, ""
	var walked []string
	if rest != "" {
		for name := range strings.SplitSeq(rest, ".") {
			next, err := schemaField(t, name)
			if err != nil {
				return fmt.Errorf("field %q %w in %s%s", strings.Join(append(walked, name), "."), errNoField, r.Kind, err.Error())
			}
			walked = append(walked, name)
			owner, field = elemStruct(t), name
			if next == nil {
				// A Kubernetes-only field: nothing below it is read.
				t = nil
				continue
			}
			t = next
		}
	}
	fmt.Fprintf(w, "KIND:       %s\nVERSION:    %s\n\n", r.Kind, r.APIVersion())
	desc := kindDescriptions[r.Kind]
	if field != "" {
		fmt.Fprintf(w, "FIELD: %s <%s>\n\n", field, schemaTypeName(t))
		desc = fieldDescription(owner, field, t)
	}
	fmt.Fprintf(w, "DESCRIPTION:\n%s\n", indentText(desc, "    "))
	fields := explainable(t)
	if len(fields) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nFIELDS:")
	if recursive {
		printFieldTree(w, elemStruct(t), "  ", map[reflect.Type]bool{})
		return nil
	}
	for i, f := range fields {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "  %s\t<%s>\n%s\n", f.Name, schemaTypeName(f.Type), indentText(fieldDescription(elemStruct(t), f.Name, f.Type), "    "))
	}
	return nil
}

// schemaField finds the field name of t, looking through lists and maps
// to their elements as kubectl does. It returns the field's type (nil for
// a Kubernetes-only field), or an error whose text completes "field X
// does not exist in KIND" with why.
func schemaField(t reflect.Type, name string) (reflect.Type, error) {
	if t == nil {
		return nil, fmt.Errorf(": the field before it is one outpost does not act on")
	}
	st := elemStruct(t)
	fields := explainable(t)
	if len(fields) == 0 {
		return nil, fmt.Errorf(": the field before it is of type %s, which has no fields", schemaTypeName(t))
	}
	for _, f := range fields {
		if f.Name == name {
			return f.Type, nil
		}
	}
	for _, f := range fields {
		if strings.EqualFold(f.Name, name) {
			return nil, fmt.Errorf(" (%s); did you mean %q?", st.Name(), f.Name)
		}
	}
	return nil, fmt.Errorf(" (%s)", st.Name())
}

// elemStruct is the struct type whose fields stand for t: t itself, or
// the element of its lists and maps (nil when there is none).
func elemStruct(t reflect.Type) reflect.Type {
	if t == nil {
		return nil
	}
	t = api.SchemaElem(t)
	for (t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8) || t.Kind() == reflect.Map {
		t = api.SchemaElem(t.Elem())
	}
	if t.Kind() != reflect.Struct || api.SchemaLeaf(t) {
		return nil
	}
	return t
}

// explainable lists the fields of t's struct (through lists and maps)
// in name order, as kubectl explain does.
func explainable(t reflect.Type) []api.SchemaField {
	st := elemStruct(t)
	if st == nil {
		return nil
	}
	fields := api.SchemaFields(st)
	slices.SortFunc(fields, func(a, b api.SchemaField) int { return strings.Compare(a.Name, b.Name) })
	return fields
}

// printFieldTree prints the fields of t and, indented, theirs; a type
// already being printed higher up is not expanded again.
func printFieldTree(w io.Writer, t reflect.Type, indent string, open map[reflect.Type]bool) {
	if t == nil || open[t] {
		return
	}
	open[t] = true
	defer delete(open, t)
	for _, f := range explainable(t) {
		fmt.Fprintf(w, "%s%s\t<%s>\n", indent, f.Name, schemaTypeName(f.Type))
		printFieldTree(w, elemStruct(f.Type), indent+"  ", open)
	}
}

// schemaTypeName names a field's type as kubectl explain does: string,
// integer, boolean, number, a struct's name, []T and map[string]T;
// <ignored> for the Kubernetes fields outpost drops.
func schemaTypeName(t reflect.Type) string {
	if t == nil {
		return "ignored"
	}
	t = api.SchemaElem(t)
	switch t {
	case reflect.TypeFor[api.Time]():
		return "string" // RFC 3339, as Kubernetes' schema says
	case reflect.TypeFor[api.Quantity]():
		return "Quantity"
	case reflect.TypeFor[api.IntOrString]():
		return "IntOrString"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "string" // base64
		}
		return "[]" + schemaTypeName(t.Elem())
	case reflect.Map:
		return "map[string]" + schemaTypeName(t.Elem())
	case reflect.Interface:
		return "Object"
	case reflect.Struct:
		if api.SchemaLeaf(t) {
			return "string"
		}
		return t.Name()
	}
	return t.String()
}

// fieldDescription is the description of owner's field name: from the
// table below when it has one, else what the schema itself says.
func fieldDescription(owner reflect.Type, name string, t reflect.Type) string {
	if t == nil {
		return "A Kubernetes field outpost accepts and does not act on: the API drops it with a warning."
	}
	if owner != nil {
		if d, ok := fieldDescriptions[owner.Name()+"."+name]; ok {
			return d
		}
	}
	if d, ok := fieldDescriptions[name]; ok {
		return d
	}
	return "<no description>"
}

// indentText indents every line of s.
func indentText(s, indent string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = indent + l
	}
	return strings.Join(lines, "\n")
}

// kindDescriptions say in a sentence what each kind is for.
var kindDescriptions = map[string]string{
	"Namespace":              "Namespace groups namespaced objects and scopes their names and access.",
	"Node":                   "Node is a host that runs pods through its outpost agent.",
	"Pod":                    "Pod is one or more containers run together on one node, sharing a network.",
	"Event":                  "Event records something that happened to an object, for people to read.",
	"Service":                "Service gives a set of pods, chosen by labels, one stable address and port.",
	"ReplicaSet":             "ReplicaSet keeps a number of identical pods running.",
	"Deployment":             "Deployment rolls a pod template out through ReplicaSets and keeps their history.",
	"DaemonSet":              "DaemonSet runs one pod of a template on every node that matches it.",
	"Token":                  "Token is a bearer token of outpost's API, with its role and namespaces.",
	"SchedulerPolicy":        "SchedulerPolicy sets the scheduler's predicates and priorities.",
	"PodDisruptionBudget":    "PodDisruptionBudget limits how many pods of a set voluntary evictions may take down.",
	"Machine":                "Machine is one host of the cluster as the machine API manages it.",
	"MachineSet":             "MachineSet keeps a number of machines of a template.",
	"ControlPlaneMachineSet": "ControlPlaneMachineSet manages the machines of the control plane.",
	"MachineHealthCheck":     "MachineHealthCheck remediates machines whose nodes stay unhealthy.",
	"MachineConfig":          "MachineConfig is a piece of the operating system configuration of nodes.",
	"MachineConfigPool":      "MachineConfigPool rolls rendered machine configs out to a group of nodes.",
	"MachineConfiguration":   "MachineConfiguration sets how the machine config operator behaves.",
	"ClusterVersion":         "ClusterVersion is the cluster's version, its update history and the updates available.",
	"ClusterOperator":        "ClusterOperator reports the state of one component of the cluster.",
	"EndpointSlice":          "EndpointSlice lists addresses behind a Service, for the service proxy.",
}

// fieldDescriptions describe the fields users look up most; the key is
// "GoType.field", or the field name alone for a meaning shared by every
// type. Fields not here are still listed, with their types.
var fieldDescriptions = map[string]string{
	"apiVersion":  "The versioned schema of this object: \"v1\" for the core group, \"GROUP/VERSION\" for others.",
	"kind":        "The kind of this object, in CamelCase: what the rest of it means.",
	"metadata":    "The object's name, namespace, labels, annotations and what the server keeps of it.",
	"spec":        "What the user wants: the desired state of the object.",
	"status":      "What the system observed: the current state, written by the server and controllers.",
	"labels":      "Key-value pairs that selectors (of services, replica sets, deployments) match objects by.",
	"annotations": "Key-value pairs for tools and people; not used to select objects.",
	"selector":    "The label selector of the pods this object manages or serves.",
	"replicas":    "The number of pods wanted; 1 when not set.",
	"template":    "The pod template: the pods this object makes are created from it.",
	"conditions":  "The latest observations of the object's state, one per condition type.",

	"ObjectMeta.name":              "The object's name, unique among objects of its kind in its namespace.",
	"ObjectMeta.generateName":      "A prefix from which the server makes a unique name when name is empty.",
	"ObjectMeta.namespace":         "The namespace the object lives in; empty for cluster-scoped kinds.",
	"ObjectMeta.uid":               "The server's unique identifier of this object; set by the server.",
	"ObjectMeta.resourceVersion":   "The version of the object the client read, for conditional updates; set by the server.",
	"ObjectMeta.generation":        "A number the server raises on each change of the spec.",
	"ObjectMeta.creationTimestamp": "When the object was created; set by the server.",
	"ObjectMeta.deletionTimestamp": "When a graceful deletion began; set by the server.",
	"ObjectMeta.ownerReferences":   "The objects this one depends on; it is deleted with its controller.",
	"ObjectMeta.finalizers":        "Names that must be removed before a deleted object goes away.",

	"PodSpec.containers":                    "The containers of the pod; at least one.",
	"PodSpec.initContainers":                "Containers that run to completion, one after another, before the others start.",
	"PodSpec.volumes":                       "Volumes the pod's containers may mount.",
	"PodSpec.restartPolicy":                 "When containers are restarted: Always (the default), OnFailure or Never.",
	"PodSpec.terminationGracePeriodSeconds": "Seconds between SIGTERM and SIGKILL when the pod is stopped; 30 when not set.",
	"PodSpec.nodeSelector":                  "Labels a node must have for the pod to be scheduled there.",
	"PodSpec.nodeName":                      "The node the pod runs on; set by the scheduler, or by the user to skip it.",
	"PodSpec.schedulerName":                 "The scheduler that places the pod.",
	"PodSpec.affinity":                      "Node and pod affinity rules of scheduling.",
	"PodSpec.tolerations":                   "The node taints the pod tolerates.",
	"PodSpec.hostNetwork":                   "Run the pod in the node's network namespace.",
	"PodSpec.dnsPolicy":                     "How the pod's resolv.conf is made: ClusterFirst, ClusterFirstWithHostNet, Default or None.",

	"Container.name":            "The container's name, unique in the pod.",
	"Container.image":           "The container image to run.",
	"Container.command":         "The entrypoint, replacing the image's; run without a shell.",
	"Container.args":            "The arguments of the entrypoint, replacing the image's CMD.",
	"Container.workingDir":      "The container's working directory.",
	"Container.ports":           "Ports the container listens on; informational, plus host ports.",
	"Container.env":             "Environment variables set in the container.",
	"Container.resources":       "CPU and memory requests (for scheduling) and limits (enforced).",
	"Container.volumeMounts":    "The pod's volumes mounted into the container.",
	"Container.imagePullPolicy": "When the image is pulled: Always, IfNotPresent or Never.",

	"ContainerPort.containerPort": "The port number the container listens on.",
	"ContainerPort.hostPort":      "A port of the node forwarded to the container.",
	"ContainerPort.protocol":      "TCP (the default), UDP or SCTP.",

	"ServiceSpec.type":      "ClusterIP (the default) or NodePort.",
	"ServiceSpec.ports":     "The ports the service serves and the pods' ports they go to.",
	"ServiceSpec.clusterIP": "The service's virtual address; allocated by the server when empty.",

	"DeploymentSpec.strategy":                "How pods of the old template are replaced: RollingUpdate or Recreate.",
	"DeploymentSpec.paused":                  "A paused deployment does not roll its template out.",
	"DeploymentSpec.revisionHistoryLimit":    "How many old ReplicaSets are kept for rollback.",
	"DeploymentSpec.progressDeadlineSeconds": "Seconds a rollout may make no progress before it is reported failed.",
	"DeploymentSpec.minReadySeconds":         "Seconds a new pod must be ready before it counts as available.",
}
