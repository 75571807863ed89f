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

	"ServiceSpec.type":      "How the service is reached: ClusterIP (the default: a virtual address inside the cluster), NodePort (also a port on every node), LoadBalancer or ExternalName (a DNS alias).",
	"ServiceSpec.ports":     "The ports the service serves and the pods' ports they go to.",
	"ServiceSpec.clusterIP": "The service's virtual address; allocated by the server when empty.",

	"DeploymentSpec.strategy":                "How pods of the old template are replaced: RollingUpdate or Recreate.",
	"DeploymentSpec.paused":                  "A paused deployment does not roll its template out.",
	"DeploymentSpec.revisionHistoryLimit":    "How many old ReplicaSets are kept for rollback.",
	"DeploymentSpec.progressDeadlineSeconds": "Seconds a rollout may make no progress before it is reported failed.",
	"DeploymentSpec.minReadySeconds":         "Seconds a new pod must be ready before it counts as available.",

	// Conditions, read the same way on every kind.
	"lastTransitionTime": "When the condition last changed its status.",
	"lastUpdateTime":     "When the condition was last written, changed or not.",
	"lastHeartbeatTime":  "When the node's agent last reported this condition.",
	"lastProbeTime":      "When the condition was last checked.",
	"observedGeneration": "The metadata.generation the controller last acted on; lower than it means the latest spec change is not handled yet.",
	"matchLabels":        "Labels an object must all have to be selected.",
	"matchExpressions":   "Rules an object's labels must all meet to be selected, beside matchLabels.",

	"DeploymentStrategy.type":                "Recreate (stop every old pod, then start the new ones) or RollingUpdate (the default: replace pods a few at a time).",
	"DeploymentStrategy.rollingUpdate":       "The bounds of a RollingUpdate: how far below and above the wanted replicas the rollout may go.",
	"RollingUpdateDeployment.maxSurge":       "How many pods above replicas may exist during a rollout, as a number or a percentage of replicas (rounded up); 25% when not set.",
	"RollingUpdateDeployment.maxUnavailable": "How many of the wanted replicas may be unavailable during a rollout, as a number or a percentage (rounded down); 25% when not set. It cannot be 0 when maxSurge is 0.",
	"DeploymentStatus.replicas":              "The number of pods of all the deployment's ReplicaSets.",
	"DeploymentStatus.updatedReplicas":       "The number of pods that run the current template.",
	"DeploymentStatus.readyReplicas":         "The number of the deployment's pods that are ready.",
	"DeploymentStatus.availableReplicas":     "The number of pods ready for at least minReadySeconds.",
	"DeploymentStatus.unavailableReplicas":   "How many pods are missing for every wanted replica to be available.",
	"DeploymentStatus.conditions":            "Available (enough pods are available) and Progressing (the rollout moves on, is done, or missed its deadline: reason ProgressDeadlineExceeded).",
	"DeploymentCondition.type":               "Available, Progressing or ReplicaFailure.",
	"DeploymentCondition.status":             "True, False or Unknown.",
	"DeploymentCondition.reason":             "One CamelCase word saying why the condition has its status, e.g. NewReplicaSetAvailable.",
	"DeploymentCondition.message":            "A sentence for people about the condition.",

	"ReplicaSetStatus.replicas":             "The number of pods the replica set has.",
	"ReplicaSetStatus.fullyLabeledReplicas": "The number of its pods whose labels match the template's.",
	"ReplicaSetStatus.readyReplicas":        "The number of its pods that are ready.",
	"ReplicaSetStatus.availableReplicas":    "The number of its pods ready for at least minReadySeconds.",
	"ReplicaSetSpec.minReadySeconds":        "Seconds a new pod must be ready before it counts as available.",

	"DaemonSetSpec.updateStrategy":           "How pods are replaced when the template changes: RollingUpdate (the default) or OnDelete.",
	"DaemonSetSpec.minReadySeconds":          "Seconds a new pod must be ready before it counts as available.",
	"DaemonSetSpec.revisionHistoryLimit":     "How many old revisions to keep; 10 when not set.",
	"DaemonSetUpdateStrategy.type":           "RollingUpdate (replace pods node by node as the template changes; the default) or OnDelete (new pods only where the old one was deleted).",
	"DaemonSetUpdateStrategy.rollingUpdate":  "The bounds of a RollingUpdate.",
	"RollingUpdateDaemonSet.maxUnavailable":  "How many nodes may be without an available pod of the set during an update, as a number or a percentage of the nodes; 1 when not set.",
	"RollingUpdateDaemonSet.maxSurge":        "How many nodes may run an old and a new pod at once during an update, as a number or a percentage; 0 when not set.",
	"DaemonSetStatus.desiredNumberScheduled": "The number of nodes that should run a pod of the set.",
	"DaemonSetStatus.currentNumberScheduled": "The number of nodes that run a pod of the set and should.",
	"DaemonSetStatus.numberMisscheduled":     "The number of nodes that run a pod of the set but should not.",
	"DaemonSetStatus.numberReady":            "The number of nodes whose pod of the set is ready.",
	"DaemonSetStatus.numberAvailable":        "The number of nodes whose pod of the set has been ready for minReadySeconds.",
	"DaemonSetStatus.numberUnavailable":      "The number of nodes that should run an available pod of the set and do not.",
	"DaemonSetStatus.updatedNumberScheduled": "The number of nodes that run a pod of the current template.",

	"PodSpec.priority":          "The pod's priority, a number; stored and shown, not used by outpost's scheduler to preempt.",
	"PodSpec.priorityClassName": "The name of the pod's priority class; stored and shown.",
	"PodSpec.dnsConfig":         "Name servers, search domains and resolver options added to the pod's resolv.conf (all of it with dnsPolicy None).",
	"PodDNSConfig.nameservers":  "Addresses of name servers, added to those of the DNS policy.",
	"PodDNSConfig.searches":     "Search domains, added to those of the DNS policy.",
	"PodDNSConfig.options":      "Resolver options, such as ndots with value 2.",
	"PodDNSConfigOption.name":   "The option's name, e.g. ndots.",
	"PodDNSConfigOption.value":  "The option's value, if it takes one.",

	"PodStatus.phase":                 "Where the pod is in its life: Pending (accepted, not all containers started), Running, Succeeded, Failed or Unknown (its node does not report).",
	"PodStatus.conditions":            "PodScheduled, Initialized, ContainersReady and Ready, each True or False.",
	"PodStatus.message":               "A sentence for people on why the pod is in its phase.",
	"PodStatus.reason":                "One CamelCase word on why the pod is in its phase, e.g. Evicted.",
	"PodStatus.hostIP":                "The address of the node the pod runs on.",
	"PodStatus.podIP":                 "The pod's own address, which its containers share; empty until the pod's network is set up.",
	"PodStatus.podIPs":                "The pod's addresses, as a list (podIP is the first).",
	"PodIPEntry.ip":                   "One address of the pod.",
	"PodStatus.startTime":             "When the node's agent began to run the pod.",
	"PodStatus.nominatedNodeName":     "A node the scheduler picked for the pod before binding it.",
	"PodStatus.qosClass":              "Guaranteed (every container has equal requests and limits), Burstable or BestEffort (none set): which pods go first under memory pressure.",
	"PodStatus.containerStatuses":     "One entry per container: its state, readiness and restart count.",
	"PodStatus.initContainerStatuses": "One entry per init container, as containerStatuses.",
	"PodCondition.type":               "PodScheduled, Initialized, ContainersReady or Ready.",
	"PodCondition.status":             "True, False or Unknown.",
	"PodCondition.reason":             "One CamelCase word saying why the condition has its status.",
	"PodCondition.message":            "A sentence for people about the condition.",

	"ContainerStatus.name":                 "The container's name, as in the pod's spec.",
	"ContainerStatus.state":                "What the container does now: exactly one of waiting, running or terminated.",
	"ContainerStatus.lastState":            "The state the container was in before its last restart; empty if it never restarted.",
	"ContainerStatus.ready":                "Whether the container is ready to serve.",
	"ContainerStatus.started":              "Whether the container has started.",
	"ContainerStatus.restartCount":         "How many times the container was restarted.",
	"ContainerStatus.image":                "The image the container runs.",
	"ContainerStatus.imageID":              "The image's digest, naming exactly what runs.",
	"ContainerStatus.containerID":          "The runtime's ID of the container, as containerd://ID.",
	"ContainerState.waiting":               "The container is not running yet, or between restarts.",
	"ContainerState.running":               "The container runs.",
	"ContainerState.terminated":            "The container ran and ended.",
	"ContainerStateWaiting.reason":         "Why the container waits, e.g. ContainerCreating, ImagePullBackOff or CrashLoopBackOff.",
	"ContainerStateWaiting.message":        "A sentence for people on why the container waits.",
	"ContainerStateRunning.startedAt":      "When the container last started.",
	"ContainerStateTerminated.exitCode":    "The exit status of the container's process.",
	"ContainerStateTerminated.signal":      "The signal that ended the process, if one did.",
	"ContainerStateTerminated.reason":      "Why the container ended, e.g. Completed, Error or OOMKilled.",
	"ContainerStateTerminated.message":     "A sentence for people on why the container ended.",
	"ContainerStateTerminated.startedAt":   "When the container started.",
	"ContainerStateTerminated.finishedAt":  "When the container ended.",
	"ContainerStateTerminated.containerID": "The runtime's ID of the container that ended.",

	"EnvVar.name":                                     "The variable's name.",
	"EnvVar.value":                                    "The variable's value.",
	"ContainerPort.name":                              "A name for the port, which a Service's targetPort may use.",
	"ContainerPort.hostIP":                            "The node address a hostPort binds to; every address when empty.",
	"ResourceRequirements.requests":                   "What the container is guaranteed: cpu (cores, e.g. 250m) and memory (bytes, e.g. 128Mi). The scheduler places pods by requests.",
	"ResourceRequirements.limits":                     "The most the container may use: cpu is throttled above it, a container above its memory limit is killed.",
	"VolumeMount.name":                                "The name of the pod volume to mount.",
	"VolumeMount.mountPath":                           "Where in the container the volume appears.",
	"VolumeMount.readOnly":                            "Mount the volume read-only.",
	"VolumeMount.subPath":                             "A path inside the volume to mount instead of its root.",
	"Volume.name":                                     "The volume's name, which volumeMounts refer to.",
	"Volume.hostPath":                                 "A file or directory of the node, mounted as it is.",
	"Volume.emptyDir":                                 "An empty directory made for the pod and removed with it.",
	"Volume.persistentVolumeClaim":                    "Storage held by a PersistentVolumeClaim of the pod's namespace.",
	"HostPathVolumeSource.path":                       "The path on the node.",
	"HostPathVolumeSource.type":                       "What must be at the path: empty (no check), Directory, DirectoryOrCreate, File, FileOrCreate, Socket and so on.",
	"EmptyDirVolumeSource.medium":                     "Where the directory lives: the node's disk (empty) or Memory (a tmpfs).",
	"EmptyDirVolumeSource.sizeLimit":                  "The most the directory may hold.",
	"PersistentVolumeClaimVolumeSource.claimName":     "The name of the claim, in the pod's namespace.",
	"PersistentVolumeClaimVolumeSource.readOnly":      "Mount the claim's volume read-only.",
	"Toleration.key":                                  "The taint key this toleration matches; empty with operator Exists matches every taint.",
	"Toleration.operator":                             "Equal (the default: key and value must match) or Exists (any value).",
	"Toleration.value":                                "The taint value to match with operator Equal.",
	"Toleration.effect":                               "The taint effect matched: NoSchedule, PreferNoSchedule or NoExecute; empty matches all.",
	"Toleration.tolerationSeconds":                    "For NoExecute: how long the pod stays on the node after the taint appears; for ever when not set.",
	"Affinity.nodeAffinity":                           "Rules on the labels of the node the pod may run on.",
	"Affinity.podAffinity":                            "Rules to place the pod near pods with given labels.",
	"Affinity.podAntiAffinity":                        "Rules to keep the pod away from pods with given labels.",
	"requiredDuringSchedulingIgnoredDuringExecution":  "Rules a node must meet for the pod to be scheduled there; not rechecked once it runs.",
	"preferredDuringSchedulingIgnoredDuringExecution": "Rules the scheduler favours, each with a weight; a node that meets none can still be chosen.",
	"NodeSelector.nodeSelectorTerms":                  "Terms of which a node must meet at least one.",
	"PreferredSchedulingTerm.weight":                  "How much meeting the term counts, from 1 to 100.",
	"PreferredSchedulingTerm.preference":              "The node selector term to meet.",
	"WeightedPodAffinityTerm.weight":                  "How much meeting the term counts, from 1 to 100.",
	"WeightedPodAffinityTerm.podAffinityTerm":         "The pod affinity term to meet.",
	"PodAffinityTerm.labelSelector":                   "The labels of the pods to be near, or away from.",
	"PodAffinityTerm.namespaces":                      "The namespaces of those pods; the pod's own when empty.",
	"PodAffinityTerm.topologyKey":                     "The node label that makes a domain (kubernetes.io/hostname: a node, topology.kubernetes.io/zone: a zone).",
	"NodeSelectorTerm.matchExpressions":               "Rules the node's labels must all meet.",
	"NodeSelectorTerm.matchFields":                    "Rules the node's fields must all meet (metadata.name).",
	"NodeSelectorRequirement.key":                     "The label key (or field) the rule is about.",
	"NodeSelectorRequirement.operator":                "In, NotIn, Exists, DoesNotExist, Gt or Lt (Gt and Lt compare integers).",
	"NodeSelectorRequirement.values":                  "The values for In and NotIn, one integer for Gt and Lt; empty for Exists and DoesNotExist.",
	"LabelSelectorRequirement.key":                    "The label key the rule is about.",
	"LabelSelectorRequirement.operator":               "In, NotIn, Exists or DoesNotExist.",
	"LabelSelectorRequirement.values":                 "The values for In and NotIn; empty for Exists and DoesNotExist.",

	"ServiceSpec.externalName":          "For type ExternalName: the DNS name the service's name is an alias (CNAME) of.",
	"ServiceSpec.sessionAffinity":       "None (the default) or ClientIP: send a client's connections to the same pod.",
	"ServiceSpec.sessionAffinityConfig": "Settings of ClientIP session affinity.",
	"SessionAffinityConfig.clientIP":    "How long a client stays with its pod.",
	"ClientIPConfig.timeoutSeconds":     "Seconds a client may be idle and keep its pod; 10800 (3 hours) when not set.",
	"ServicePort.name":                  "The port's name; required when the service has several ports.",
	"ServicePort.protocol":              "TCP (the default), UDP or SCTP.",
	"ServicePort.port":                  "The port the service serves on its cluster IP.",
	"ServicePort.targetPort":            "The pods' port connections go to: a number, or the name of a container port; the same as port when not set.",
	"ServicePort.nodePort":              "For NodePort services: the port every node serves; picked from the node port range when not set.",

	"NodeSpec.unschedulable":                 "No new pods are scheduled on the node; set by cordon and drain.",
	"NodeSpec.taints":                        "Taints that keep pods which do not tolerate them off the node.",
	"NodeSpec.podCIDR":                       "The address range the node's pods take their IPs from, given by the control plane.",
	"NodeSpec.podCIDRs":                      "The same range as podCIDR, as a list.",
	"NodeSpec.providerID":                    "The node's ID at its infrastructure provider, if any.",
	"Taint.key":                              "The taint's key, e.g. node.kubernetes.io/unreachable.",
	"Taint.value":                            "The taint's value, which a toleration with operator Equal must match.",
	"Taint.effect":                           "NoSchedule (no new pods), PreferNoSchedule (avoid placing pods) or NoExecute (also evict running pods that do not tolerate it).",
	"Taint.timeAdded":                        "When a NoExecute taint was added.",
	"NodeStatus.capacity":                    "What the node has: cpu (cores), memory (bytes), pods (how many it may run) and other resources.",
	"NodeStatus.allocatable":                 "The part of capacity left for pods, after what is reserved for the system; the scheduler places pods within it.",
	"NodeStatus.phase":                       "Unused by outpost; kept for manifests that carry it.",
	"NodeStatus.conditions":                  "Ready, MemoryPressure, DiskPressure, PIDPressure and NetworkUnavailable, each with a status; the agent reports them.",
	"NodeStatus.addresses":                   "The node's addresses: InternalIP, ExternalIP and Hostname.",
	"NodeStatus.nodeInfo":                    "The node's system: kernel, OS image, architecture, runtime and agent versions, machine and boot IDs.",
	"NodeStatus.images":                      "Container images present on the node, which the scheduler favours nodes for.",
	"NodeStatus.daemonEndpoints":             "The port the node's agent serves logs, exec, port-forward and image import on.",
	"NodeDaemonEndpoints.kubeletEndpoint":    "The agent's endpoint (Kubernetes' name for it).",
	"DaemonEndpoint.Port":                    "The port number.",
	"NodeCondition.type":                     "Ready, MemoryPressure, DiskPressure, PIDPressure or NetworkUnavailable.",
	"NodeCondition.status":                   "True, False or Unknown (the agent stopped reporting).",
	"NodeCondition.reason":                   "One CamelCase word saying why the condition has its status, e.g. NodeStatusUnknown.",
	"NodeCondition.message":                  "A sentence for people about the condition.",
	"NodeAddress.type":                       "InternalIP, ExternalIP, Hostname, InternalDNS or ExternalDNS.",
	"NodeAddress.address":                    "The address itself.",
	"ContainerImage.names":                   "The image's names and digests.",
	"ContainerImage.sizeBytes":               "The image's size in bytes.",
	"NodeSystemInfo.machineID":               "The host's /etc/machine-id.",
	"NodeSystemInfo.systemUUID":              "The hardware's UUID, from its firmware.",
	"NodeSystemInfo.bootID":                  "The ID of the host's current boot; it changes when the host reboots.",
	"NodeSystemInfo.kernelVersion":           "The kernel release (uname -r).",
	"NodeSystemInfo.osImage":                 "The operating system's name and version, from /etc/os-release.",
	"NodeSystemInfo.containerRuntimeVersion": "The container runtime and its version, as runtime://version.",
	"NodeSystemInfo.kubeletVersion":          "The version of the node's agent.",
	"NodeSystemInfo.kubeProxyVersion":        "The version of a Kubernetes kube-proxy; outpost's agent, which is its own service proxy, leaves it empty.",
	"NodeSystemInfo.operatingSystem":         "The operating system family, e.g. linux.",
	"NodeSystemInfo.architecture":            "The CPU architecture, e.g. amd64 or arm64.",
}
