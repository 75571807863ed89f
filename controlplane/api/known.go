package api

import "reflect"

// kubernetesOnlyFields lists, per Go struct, the JSON fields that the
// Kubernetes v1 API has on the same object but outpost's type does not.
// Manifests written for Kubernetes carry them (kubectl, Helm and
// `kubectl get -o yaml` all emit several), so the decoder accepts them with a
// warning and drops their content instead of refusing the object. A field
// in neither the Go type nor this table is a typo and is refused.
//
// A struct that is missing here has no Kubernetes-only fields. Adding a
// field to a Go type must remove it from this table; a test checks that the
// two never overlap.
var kubernetesOnlyFields = map[reflect.Type][]string{
	reflect.TypeFor[ObjectMeta](): {
		"selfLink", "managedFields",
		"clusterName", // removed in Kubernetes 1.25; old exports still carry it
	},

	// core/v1 Namespace.
	reflect.TypeFor[NamespaceStatus](): {"conditions"},

	// core/v1 Node.
	reflect.TypeFor[NodeSpec](): {"configSource", "externalID"},
	reflect.TypeFor[NodeStatus](): {
		"volumesInUse", "volumesAttached", "config",
		"runtimeHandlers", "features", "declaredFeatures",
	},
	reflect.TypeFor[NodeSystemInfo](): {"swap"},

	// core/v1 Event.
	reflect.TypeFor[Event](): {
		"eventTime", "series", "action", "related",
		"reportingComponent", "reportingInstance",
	},

	// core/v1 Service.
	reflect.TypeFor[ServiceSpec](): {
		"clusterIPs", "externalIPs",
		"loadBalancerIP", "loadBalancerSourceRanges", "loadBalancerClass",
		"externalTrafficPolicy", "internalTrafficPolicy",
		"healthCheckNodePort", "publishNotReadyAddresses", "ipFamilies",
		"ipFamilyPolicy", "allocateLoadBalancerNodePorts", "trafficDistribution",
	},
	reflect.TypeFor[ServicePort]():   {"appProtocol"},
	reflect.TypeFor[ServiceStatus](): {"loadBalancer", "conditions"},

	// core/v1 Pod.
	reflect.TypeFor[PodSpec](): {
		"ephemeralContainers", "activeDeadlineSeconds",
		"serviceAccountName", "serviceAccount", "automountServiceAccountToken",
		"hostPID", "hostIPC", "hostUsers", "shareProcessNamespace",
		"securityContext", "imagePullSecrets", "hostname", "hostnameOverride",
		"subdomain", "hostAliases", "readinessGates", "runtimeClassName",
		"enableServiceLinks", "preemptionPolicy", "overhead",
		"topologySpreadConstraints", "setHostnameAsFQDN", "os",
		"schedulingGates", "resourceClaims", "resources",
	},
	reflect.TypeFor[Container](): {
		"envFrom", "resizePolicy", "restartPolicy", "restartPolicyRules",
		"volumeDevices", "livenessProbe", "readinessProbe", "startupProbe",
		"lifecycle", "terminationMessagePath", "terminationMessagePolicy",
		"securityContext", "stdin", "stdinOnce", "tty",
	},
	reflect.TypeFor[EnvVar]():               {"valueFrom"},
	reflect.TypeFor[ResourceRequirements](): {"claims"},
	reflect.TypeFor[VolumeMount](): {
		"recursiveReadOnly", "mountPropagation", "subPathExpr",
	},
	reflect.TypeFor[Volume](): {
		"gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "secret", "nfs",
		"iscsi", "glusterfs", "rbd", "flexVolume", "cinder", "cephfs", "flocker",
		"downwardAPI", "fc", "azureFile", "configMap", "vsphereVolume", "quobyte",
		"azureDisk", "photonPersistentDisk", "projected", "portworxVolume",
		"scaleIO", "storageos", "csi", "ephemeral", "image",
	},
	reflect.TypeFor[PodAffinityTerm](): {
		"namespaceSelector", "matchLabelKeys", "mismatchLabelKeys",
	},
	reflect.TypeFor[PodStatus](): {
		"hostIPs", "ephemeralContainerStatuses", "resize",
		"resourceClaimStatuses", "observedGeneration", "extendedResourceClaimStatus",
	},
	reflect.TypeFor[PodCondition](): {"observedGeneration"},
	reflect.TypeFor[ContainerStatus](): {
		"allocatedResources", "allocatedResourcesStatus", "resources",
		"volumeMounts", "user", "stopSignal",
	},

	// apps/v1.
	reflect.TypeFor[ReplicaSetStatus](): {"terminatingReplicas", "conditions"},
	reflect.TypeFor[DeploymentStatus](): {"terminatingReplicas", "collisionCount"},
	reflect.TypeFor[DaemonSetStatus]():  {"collisionCount", "conditions"},

	// policy/v1 PodDisruptionBudget: every pod is judged by readiness
	// (IfHealthyBudget, Kubernetes' default).
	reflect.TypeFor[PodDisruptionBudgetSpec]():   {"unhealthyPodEvictionPolicy"},
	reflect.TypeFor[PodDisruptionBudgetStatus](): {"disruptedPods", "conditions"},
}
