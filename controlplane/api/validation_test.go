package api

import (
	"slices"
	"strings"
	"testing"
)

// wantErr is one expected field error: its path, type and a piece of its
// message.
type wantErr struct {
	field, typ, detail string
}

// checkErrs fails unless errs holds an error for every want.
func checkErrs(t *testing.T, errs ErrorList, wants ...wantErr) {
	t.Helper()
	for _, w := range wants {
		found := false
		for _, e := range errs {
			if e.Field == w.field && (w.typ == "" || e.Type == w.typ) && strings.Contains(e.Error(), w.detail) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no %s error at %s containing %q; got %v", w.typ, w.field, w.detail, errs)
		}
	}
}

func validPod() *Pod {
	p := &Pod{
		ObjectMeta: ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: PodSpec{
			Containers: []Container{{
				Name: "web", Image: "nginx:1.25",
				Ports:        []ContainerPort{{Name: "http", ContainerPort: 8080, HostPort: 8080}},
				Env:          []EnvVar{{Name: "MODE", Value: "x"}},
				VolumeMounts: []VolumeMount{{Name: "data", MountPath: "/data"}},
				Resources: ResourceRequirements{
					Requests: ResourceList{"cpu": MustParseQuantity("100m")},
					Limits:   ResourceList{"cpu": MustParseQuantity("1")},
				},
			}},
			Volumes:      []Volume{{Name: "data", EmptyDir: &EmptyDirVolumeSource{}}},
			NodeSelector: map[string]string{"zone": "us"},
			Tolerations:  []Toleration{{Key: "key1", Operator: TolerationOpEqual, Value: "value1", Effect: TaintEffectNoExecute, TolerationSeconds: ptrTo(int64(60))}},
			Affinity: &Affinity{
				NodeAffinity: &NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &NodeSelector{NodeSelectorTerms: []NodeSelectorTerm{{
						MatchExpressions: []NodeSelectorRequirement{{Key: "zone", Operator: OpIn, Values: []string{"us"}}, {Key: "cpus", Operator: OpGt, Values: []string{"2"}}},
					}}},
					PreferredDuringSchedulingIgnoredDuringExecution: []PreferredSchedulingTerm{{Weight: 1, Preference: NodeSelectorTerm{
						MatchExpressions: []NodeSelectorRequirement{{Key: "ssd", Operator: OpExists}},
					}}},
				},
				PodAntiAffinity: &PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []PodAffinityTerm{{
					LabelSelector: &LabelSelector{MatchLabels: map[string]string{"app": "web"}},
					TopologyKey:   "kubernetes.io/hostname",
				}}},
			},
		},
	}
	SetDefaults(p)
	return p
}

func TestValidatePodRules(t *testing.T) {
	if errs := Validate(validPod()); len(errs) != 0 {
		t.Fatalf("the base pod is invalid: %v", errs)
	}
	tests := []struct {
		name   string
		mutate func(p *Pod)
		want   []wantErr
	}{
		// metadata
		{"name required", func(p *Pod) { p.Name = "" }, []wantErr{{"metadata.name", FieldValueRequired, "name or generateName is required"}}},
		{"generateName instead of name", func(p *Pod) { p.Name, p.GenerateName = "", "web-" }, nil},
		{"bad generateName", func(p *Pod) { p.Name, p.GenerateName = "", "Web_" }, []wantErr{{"metadata.generateName", FieldValueInvalid, "RFC 1123 subdomain"}}},
		{"name not a subdomain", func(p *Pod) { p.Name = "Foo_" }, []wantErr{{"metadata.name", FieldValueInvalid,
			`metadata.name: Invalid value: "Foo_": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`}}},
		{"name too long", func(p *Pod) { p.Name = strings.Repeat("a", 254) }, []wantErr{{"metadata.name", FieldValueInvalid, "must be no more than 253 characters"}}},
		{"namespace required", func(p *Pod) { p.Namespace = "" }, []wantErr{{"metadata.namespace", FieldValueRequired, ""}}},
		{"namespace not a label", func(p *Pod) { p.Namespace = "a.b" }, []wantErr{{"metadata.namespace", FieldValueInvalid, "RFC 1123 label"}}},
		{"label key", func(p *Pod) { p.Labels["-bad"] = "x" }, []wantErr{{"metadata.labels", FieldValueInvalid, `"-bad": name part must consist of`}}},
		{"label key prefix", func(p *Pod) { p.Labels["Example.com/a"] = "x" }, []wantErr{{"metadata.labels", FieldValueInvalid, "prefix part a lowercase RFC 1123 subdomain"}}},
		{"label key two slashes", func(p *Pod) { p.Labels["a/b/c"] = "x" }, []wantErr{{"metadata.labels", FieldValueInvalid, "a qualified name must consist"}}},
		{"label key name too long", func(p *Pod) { p.Labels[strings.Repeat("a", 64)] = "x" }, []wantErr{{"metadata.labels", FieldValueInvalid, "name part must be no more than 63 characters"}}},
		{"label value", func(p *Pod) { p.Labels["a"] = "x y" }, []wantErr{{"metadata.labels", FieldValueInvalid, "a valid label must be an empty string"}}},
		{"label value too long", func(p *Pod) { p.Labels["a"] = strings.Repeat("v", 64) }, []wantErr{{"metadata.labels", FieldValueInvalid, "must be no more than 63 characters"}}},
		{"empty label value is fine", func(p *Pod) { p.Labels["a"] = "" }, nil},
		{"annotations too large", func(p *Pod) { p.Annotations = map[string]string{"a": strings.Repeat("x", 256*1024)} }, []wantErr{{"metadata.annotations", FieldValueTooLong, "must have at most 262144 bytes"}}},
		{"annotation key", func(p *Pod) { p.Annotations = map[string]string{"a b": ""} }, []wantErr{{"metadata.annotations", FieldValueInvalid, `"a b"`}}},
		{"finalizer", func(p *Pod) { p.Finalizers = []string{"example.com/ok", "not ok"} }, []wantErr{{"metadata.finalizers[1]", FieldValueInvalid, ""}}},
		{"finalizer duplicate", func(p *Pod) { p.Finalizers = []string{"a/b", "a/b"} }, []wantErr{{"metadata.finalizers[1]", FieldValueDuplicate, ""}}},
		{"owner reference fields", func(p *Pod) { p.OwnerReferences = []OwnerReference{{}} }, []wantErr{
			{"metadata.ownerReferences[0].apiVersion", FieldValueRequired, ""},
			{"metadata.ownerReferences[0].kind", FieldValueRequired, ""},
			{"metadata.ownerReferences[0].name", FieldValueRequired, ""},
			{"metadata.ownerReferences[0].uid", FieldValueRequired, ""},
		}},
		{"two controllers", func(p *Pod) {
			o := OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "a", UID: "1", Controller: ptrTo(true)}
			p.OwnerReferences = []OwnerReference{o, o}
		}, []wantErr{{"metadata.ownerReferences", FieldValueInvalid, "Only one reference can have Controller set to true"}}},

		// DNS (SPEC NET-4)
		{"dns policy", func(p *Pod) { p.Spec.DNSPolicy = "ClusterFirstt" }, []wantErr{{"spec.dnsPolicy", FieldValueNotSupported, `"ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"`}}},
		{"dns policy None needs a nameserver", func(p *Pod) { p.Spec.DNSPolicy = DNSNone }, []wantErr{{"spec.dnsConfig.nameservers", FieldValueRequired, "at least one DNS nameserver"}}},
		{"dns policy None with a nameserver", func(p *Pod) {
			p.Spec.DNSPolicy, p.Spec.DNSConfig = DNSNone, &PodDNSConfig{Nameservers: []string{"192.0.2.53"}, Searches: []string{"corp.example.", "b"}, Options: []PodDNSConfigOption{{Name: "ndots", Value: ptrTo("2")}}}
		}, nil},
		{"dns config, every problem", func(p *Pod) {
			p.Spec.DNSConfig = &PodDNSConfig{
				Nameservers: []string{"1.1.1.1", "dns.example", "2.2.2.2", "3.3.3.3"},
				Searches:    []string{"ok.example", "Not_OK"},
				Options:     []PodDNSConfigOption{{Value: ptrTo("1")}},
			}
		}, []wantErr{
			{"spec.dnsConfig.nameservers", FieldValueInvalid, "must not have more than 3 nameservers"},
			{"spec.dnsConfig.nameservers[1]", FieldValueInvalid, "must be a valid IP address"},
			{"spec.dnsConfig.searches[1]", FieldValueInvalid, "RFC 1123 subdomain"},
			{"spec.dnsConfig.options[0].name", FieldValueRequired, ""},
		}},
		{"dns search list too long", func(p *Pod) {
			p.Spec.DNSConfig = &PodDNSConfig{Searches: slices.Repeat([]string{strings.Repeat("a", 63) + "." + strings.Repeat("b", 63)}, 33)}
		}, []wantErr{
			{"spec.dnsConfig.searches", FieldValueInvalid, "must not have more than 32 search paths"},
			{"spec.dnsConfig.searches", FieldValueInvalid, "must not have more than 2048 characters"},
		}},

		// containers
		{"no containers", func(p *Pod) { p.Spec.Containers = nil }, []wantErr{{"spec.containers", FieldValueRequired, ""}}},
		{"container name required", func(p *Pod) { p.Spec.Containers[0].Name = "" }, []wantErr{{"spec.containers[0].name", FieldValueRequired, ""}}},
		{"container name not a label", func(p *Pod) { p.Spec.Containers[0].Name = "Web" }, []wantErr{{"spec.containers[0].name", FieldValueInvalid, "RFC 1123 label"}}},
		{"container names unique across init", func(p *Pod) {
			p.Spec.InitContainers = []Container{{Name: "web", Image: "x", ImagePullPolicy: PullAlways}}
		}, []wantErr{{"spec.containers[0].name", FieldValueDuplicate, `"web"`}}},
		{"image required", func(p *Pod) { p.Spec.Containers[0].Image = "" }, []wantErr{{"spec.containers[0].image", FieldValueRequired, ""}}},
		{"image whitespace", func(p *Pod) { p.Spec.Containers[0].Image = " nginx" }, []wantErr{{"spec.containers[0].image", FieldValueInvalid, "whitespace"}}},
		{"container port 0", func(p *Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 0 }, []wantErr{{"spec.containers[0].ports[0].containerPort", FieldValueInvalid, "must be between 1 and 65535, inclusive"}}},
		{"container port too big", func(p *Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 65536 }, []wantErr{{"spec.containers[0].ports[0].containerPort", FieldValueInvalid, "65536"}}},
		{"host port too big", func(p *Pod) { p.Spec.Containers[0].Ports[0].HostPort = 70000 }, []wantErr{{"spec.containers[0].ports[0].hostPort", FieldValueInvalid, "must be between 1 and 65535"}}},
		{"protocol", func(p *Pod) { p.Spec.Containers[0].Ports[0].Protocol = "ICMP" }, []wantErr{{"spec.containers[0].ports[0].protocol", FieldValueNotSupported, `"ICMP": supported values: "TCP", "UDP", "SCTP"`}}},
		{"port name", func(p *Pod) { p.Spec.Containers[0].Ports[0].Name = "http--x" }, []wantErr{{"spec.containers[0].ports[0].name", FieldValueInvalid, "consecutive hyphens"}}},
		{"port name duplicate", func(p *Pod) {
			p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, ContainerPort{Name: "http", ContainerPort: 81, Protocol: ProtocolTCP})
		}, []wantErr{{"spec.containers[0].ports[1].name", FieldValueDuplicate, ""}}},
		{"host port unique per protocol", func(p *Pod) {
			p.Spec.Containers = append(p.Spec.Containers, Container{Name: "b", Image: "x", ImagePullPolicy: PullAlways,
				Ports: []ContainerPort{{ContainerPort: 9090, HostPort: 8080, Protocol: ProtocolTCP}}})
		}, []wantErr{{"spec.containers[1].ports[0].hostPort", FieldValueDuplicate, `"8080/TCP"`}}},
		{"same host port other protocol is fine", func(p *Pod) {
			p.Spec.Containers = append(p.Spec.Containers, Container{Name: "b", Image: "x", ImagePullPolicy: PullAlways,
				Ports: []ContainerPort{{ContainerPort: 9090, HostPort: 8080, Protocol: ProtocolUDP}}})
		}, nil},
		{"host network needs hostPort = containerPort", func(p *Pod) { p.Spec.HostNetwork = true; p.Spec.Containers[0].Ports[0].HostPort = 9 }, []wantErr{{"spec.containers[0].ports[0].hostPort", FieldValueInvalid, "must match `containerPort`"}}},
		{"env name", func(p *Pod) { p.Spec.Containers[0].Env[0].Name = "1A" }, []wantErr{{"spec.containers[0].env[0].name", FieldValueInvalid, "must not start with a digit"}}},
		{"env name required", func(p *Pod) { p.Spec.Containers[0].Env[0].Name = "" }, []wantErr{{"spec.containers[0].env[0].name", FieldValueRequired, ""}}},
		{"request over limit", func(p *Pod) { p.Spec.Containers[0].Resources.Requests["cpu"] = MustParseQuantity("2") }, []wantErr{{"spec.containers[0].resources.requests[cpu]", FieldValueInvalid, `"2": must be less than or equal to cpu limit of 1`}}},
		{"negative request", func(p *Pod) { p.Spec.Containers[0].Resources.Requests["memory"] = MustParseQuantity("-1Mi") }, []wantErr{{"spec.containers[0].resources.requests[memory]", FieldValueInvalid, "must be greater than or equal to 0"}}},
		{"negative limit", func(p *Pod) { p.Spec.Containers[0].Resources.Limits["cpu"] = MustParseQuantity("-1") }, []wantErr{{"spec.containers[0].resources.limits[cpu]", FieldValueInvalid, "must be greater than or equal to 0"}}},
		{"resource name", func(p *Pod) { p.Spec.Containers[0].Resources.Limits["a b"] = MustParseQuantity("1") }, []wantErr{{"spec.containers[0].resources.limits[a b]", FieldValueInvalid, ""}}},
		{"imagePullPolicy", func(p *Pod) { p.Spec.Containers[0].ImagePullPolicy = "Sometimes" }, []wantErr{{"spec.containers[0].imagePullPolicy", FieldValueNotSupported, `"Always", "IfNotPresent", "Never"`}}},
		{"imagePullPolicy required", func(p *Pod) { p.Spec.Containers[0].ImagePullPolicy = "" }, []wantErr{{"spec.containers[0].imagePullPolicy", FieldValueRequired, ""}}},

		// volumes
		{"volume name", func(p *Pod) { p.Spec.Volumes[0].Name = "Data"; p.Spec.Containers[0].VolumeMounts = nil }, []wantErr{{"spec.volumes[0].name", FieldValueInvalid, "RFC 1123 label"}}},
		{"volume name duplicate", func(p *Pod) { p.Spec.Volumes = append(p.Spec.Volumes, p.Spec.Volumes[0]) }, []wantErr{{"spec.volumes[1].name", FieldValueDuplicate, `"data"`}}},
		{"volume without source", func(p *Pod) { p.Spec.Volumes[0].EmptyDir = nil }, []wantErr{{"spec.volumes[0]", FieldValueRequired, "must specify a volume type"}}},
		{"volume with two sources", func(p *Pod) { p.Spec.Volumes[0].HostPath = &HostPathVolumeSource{Path: "/x"} }, []wantErr{{"spec.volumes[0].emptyDir", FieldValueForbidden, "may not specify more than 1 volume type"}}},
		{"hostPath path", func(p *Pod) { p.Spec.Volumes[0] = Volume{Name: "data", HostPath: &HostPathVolumeSource{Type: "Pipe"}} }, []wantErr{
			{"spec.volumes[0].hostPath.path", FieldValueRequired, ""}, {"spec.volumes[0].hostPath.type", FieldValueNotSupported, `"Pipe"`}}},
		{"pvc claimName", func(p *Pod) {
			p.Spec.Volumes[0] = Volume{Name: "data", PersistentVolumeClaim: &PersistentVolumeClaimVolumeSource{}}
		}, []wantErr{{"spec.volumes[0].persistentVolumeClaim.claimName", FieldValueRequired, ""}}},
		{"mount of a missing volume", func(p *Pod) { p.Spec.Containers[0].VolumeMounts[0].Name = "cache" }, []wantErr{{"spec.containers[0].volumeMounts[0].name", FieldValueNotFound, `Not found: "cache"`}}},
		{"mount path required", func(p *Pod) { p.Spec.Containers[0].VolumeMounts[0].MountPath = "" }, []wantErr{{"spec.containers[0].volumeMounts[0].mountPath", FieldValueRequired, ""}}},
		{"subPath escapes", func(p *Pod) { p.Spec.Containers[0].VolumeMounts[0].SubPath = "a/../../b" }, []wantErr{{"spec.containers[0].volumeMounts[0].subPath", FieldValueInvalid, "'..'"}}},

		// pod-level fields
		{"restartPolicy", func(p *Pod) { p.Spec.RestartPolicy = "Sometimes" }, []wantErr{{"spec.restartPolicy", FieldValueNotSupported, `"Always", "OnFailure", "Never"`}}},
		{"restartPolicy required", func(p *Pod) { p.Spec.RestartPolicy = "" }, []wantErr{{"spec.restartPolicy", FieldValueRequired, ""}}},
		{"grace period", func(p *Pod) { p.Spec.TerminationGracePeriodSeconds = ptrTo(int64(-1)) }, []wantErr{{"spec.terminationGracePeriodSeconds", FieldValueInvalid, ""}}},
		{"nodeSelector key", func(p *Pod) { p.Spec.NodeSelector["bad key"] = "x" }, []wantErr{{"spec.nodeSelector", FieldValueInvalid, `"bad key"`}}},
		{"nodeSelector value", func(p *Pod) { p.Spec.NodeSelector["zone"] = "-us" }, []wantErr{{"spec.nodeSelector", FieldValueInvalid, `"-us"`}}},
		{"nodeName", func(p *Pod) { p.Spec.NodeName = "Node_1" }, []wantErr{{"spec.nodeName", FieldValueInvalid, "RFC 1123 subdomain"}}},
		{"schedulerName", func(p *Pod) { p.Spec.SchedulerName = "My Scheduler" }, []wantErr{{"spec.schedulerName", FieldValueInvalid, ""}}},

		// affinity
		{"node affinity operator", func(p *Pod) { nodeReq(p).Operator = "Near" }, []wantErr{{reqPath + ".operator", FieldValueNotSupported, `"Near"`}}},
		{"In needs values", func(p *Pod) { nodeReq(p).Values = nil }, []wantErr{{reqPath + ".values", FieldValueRequired, "'In' or 'NotIn'"}}},
		{"Exists forbids values", func(p *Pod) { nodeReq(p).Operator = OpExists }, []wantErr{{reqPath + ".values", FieldValueForbidden, "'Exists' or 'DoesNotExist'"}}},
		{"Gt needs one value", func(p *Pod) { nodeReq(p).Operator = OpGt; nodeReq(p).Values = []string{"1", "2"} }, []wantErr{{reqPath + ".values", FieldValueRequired, "single value"}}},
		{"Lt needs an integer", func(p *Pod) { nodeReq(p).Operator = OpLt; nodeReq(p).Values = []string{"x"} }, []wantErr{{reqPath + ".values[0]", FieldValueInvalid, "must be an integer"}}},
		{"node affinity key", func(p *Pod) { nodeReq(p).Key = "" }, []wantErr{{reqPath + ".key", FieldValueInvalid, "name part must be non-empty"}}},
		{"no node selector terms", func(p *Pod) {
			p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = nil
		}, []wantErr{{"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms", FieldValueRequired, ""}}},
		{"matchFields key", func(p *Pod) {
			p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields = []NodeSelectorRequirement{{Key: "metadata.uid", Operator: OpIn, Values: []string{"a"}}}
		}, []wantErr{{"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].key", FieldValueNotSupported, `"metadata.name"`}}},
		{"preferred weight", func(p *Pod) {
			p.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].Weight = 0
		}, []wantErr{{"spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight", FieldValueInvalid, "must be in the range 1-100"}}},
		{"pod affinity weight", func(p *Pod) {
			p.Spec.Affinity.PodAffinity = &PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []WeightedPodAffinityTerm{{Weight: 101, PodAffinityTerm: PodAffinityTerm{TopologyKey: "zone"}}}}
		}, []wantErr{{"spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight", FieldValueInvalid, "1-100"}}},
		{"topologyKey required", func(p *Pod) {
			p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey = ""
		}, []wantErr{{"spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey", FieldValueRequired, "can not be empty"}}},
		{"pod affinity selector operator", func(p *Pod) {
			p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector.MatchExpressions = []LabelSelectorRequirement{{Key: "a", Operator: OpGt, Values: []string{"1"}}}
		}, []wantErr{{"spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].operator", FieldValueNotSupported, `"Gt"`}}},
		{"pod affinity namespaces", func(p *Pod) {
			p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].Namespaces = []string{"Bad"}
		}, []wantErr{{"spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespaces[0]", FieldValueInvalid, ""}}},

		// tolerations
		{"toleration operator", func(p *Pod) { p.Spec.Tolerations[0].Operator = "Like" }, []wantErr{{"spec.tolerations[0].operator", FieldValueNotSupported, `"Equal", "Exists"`}}},
		{"Exists with a value", func(p *Pod) { p.Spec.Tolerations[0].Operator = TolerationOpExists }, []wantErr{{"spec.tolerations[0].value", FieldValueInvalid, "value must be empty when `operator` is 'Exists'"}}},
		{"empty key needs Exists", func(p *Pod) { p.Spec.Tolerations[0].Key = "" }, []wantErr{{"spec.tolerations[0].operator", FieldValueInvalid, "operator must be Exists when `key` is empty"}}},
		{"empty key with Exists matches all", func(p *Pod) { p.Spec.Tolerations[0] = Toleration{Operator: TolerationOpExists} }, nil},
		{"toleration effect", func(p *Pod) { p.Spec.Tolerations[0].Effect = "NoRun" }, []wantErr{{"spec.tolerations[0].effect", FieldValueNotSupported, `"NoSchedule", "PreferNoSchedule", "NoExecute"`}}},
		{"tolerationSeconds only with NoExecute", func(p *Pod) { p.Spec.Tolerations[0].Effect = TaintEffectNoSchedule }, []wantErr{{"spec.tolerations[0].effect", FieldValueInvalid, "effect must be 'NoExecute' when `tolerationSeconds` is set"}}},
		{"toleration key", func(p *Pod) { p.Spec.Tolerations[0].Key = "_key" }, []wantErr{{"spec.tolerations[0].key", FieldValueInvalid, "must start with a letter or digit"}}},
		{"toleration value", func(p *Pod) { p.Spec.Tolerations[0].Value = "a b" }, []wantErr{{"spec.tolerations[0].value", FieldValueInvalid, "may contain only letters, digits"}}},
		{"long toleration key as for taints", func(p *Pod) { p.Spec.Tolerations[0].Key = strings.Repeat("k", 200) }, nil},

		// status
		{"phase", func(p *Pod) { p.Status.Phase = "Sleeping" }, []wantErr{{"status.phase", FieldValueNotSupported, ""}}},
		{"condition status", func(p *Pod) { p.Status.Conditions = []PodCondition{{Type: PodScheduled, Status: "Maybe"}} }, []wantErr{{"status.conditions[0].status", FieldValueNotSupported, ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPod()
			tt.mutate(p)
			errs := Validate(p)
			if tt.want == nil {
				if len(errs) != 0 {
					t.Fatalf("want valid, got %v", errs)
				}
				return
			}
			checkErrs(t, errs, tt.want...)
		})
	}
}

const reqPath = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]"

func nodeReq(p *Pod) *NodeSelectorRequirement {
	return &p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0]
}

func TestValidateTaint(t *testing.T) {
	p := Root("spec").Child("taints").Index(0)
	tests := []struct {
		name  string
		taint Taint
		want  []wantErr
	}{
		{"plain", Taint{Key: "key1", Value: "value1", Effect: TaintEffectNoSchedule}, nil},
		{"prefixed key, no value", Taint{Key: "node.kubernetes.io/not-ready", Effect: TaintEffectNoExecute}, nil},
		{"253-character key", Taint{Key: "k" + strings.Repeat("_", 252), Effect: TaintEffectNoExecute}, nil},
		{"key required", Taint{Effect: TaintEffectNoSchedule}, []wantErr{{"spec.taints[0].key", FieldValueRequired, ""}}},
		{"key too long", Taint{Key: strings.Repeat("k", 254), Effect: TaintEffectNoSchedule}, []wantErr{{"spec.taints[0].key", FieldValueInvalid, "a taint key must be no more than 253 characters"}}},
		{"key starts with a letter or digit", Taint{Key: ".key", Effect: TaintEffectNoSchedule}, []wantErr{{"spec.taints[0].key", FieldValueInvalid, "a taint key must start with a letter or digit"}}},
		{"key alphabet", Taint{Key: "ke y", Effect: TaintEffectNoSchedule}, []wantErr{{"spec.taints[0].key", FieldValueInvalid, "a taint key may contain only letters, digits, '-', '.' and '_'"}}},
		{"key prefix", Taint{Key: "Example.com/key", Effect: TaintEffectNoSchedule}, []wantErr{{"spec.taints[0].key", FieldValueInvalid, "the prefix of a taint key (before '/') must be a DNS subdomain"}}},
		{"key empty prefix", Taint{Key: "/key", Effect: TaintEffectNoSchedule}, []wantErr{{"spec.taints[0].key", FieldValueInvalid, "must be non-empty"}}},
		{"key two slashes", Taint{Key: "a.io/b/c", Effect: TaintEffectNoSchedule}, []wantErr{{"spec.taints[0].key", FieldValueInvalid, "at most one '/'"}}},
		{"value too long", Taint{Key: "k", Value: strings.Repeat("v", 64), Effect: TaintEffectNoSchedule}, []wantErr{{"spec.taints[0].value", FieldValueInvalid, "a taint value must be no more than 63 characters"}}},
		{"value alphabet", Taint{Key: "k", Value: "v:1", Effect: TaintEffectNoSchedule}, []wantErr{{"spec.taints[0].value", FieldValueInvalid, "a taint value may contain only letters, digits"}}},
		{"value start", Taint{Key: "k", Value: "-v", Effect: TaintEffectNoSchedule}, []wantErr{{"spec.taints[0].value", FieldValueInvalid, "a taint value must start with a letter or digit"}}},
		{"effect required", Taint{Key: "k"}, []wantErr{{"spec.taints[0].effect", FieldValueRequired, "one of NoSchedule, PreferNoSchedule, NoExecute"}}},
		{"effect", Taint{Key: "k", Effect: "NoRun"}, []wantErr{{"spec.taints[0].effect", FieldValueNotSupported, `Unsupported value: "NoRun": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := ValidateTaint(tt.taint, p)
			if tt.want == nil && len(errs) > 0 {
				t.Fatalf("want valid, got %v", errs)
			}
			checkErrs(t, errs, tt.want...)
		})
	}
}

func TestValidateNode(t *testing.T) {
	n := &Node{ObjectMeta: ObjectMeta{Name: "node1"}, Spec: NodeSpec{Taints: []Taint{
		{Key: "a", Value: "1", Effect: TaintEffectNoSchedule},
		{Key: "a", Value: "2", Effect: TaintEffectNoExecute},
	}}}
	if errs := Validate(n); len(errs) != 0 {
		t.Fatalf("valid node: %v", errs)
	}
	n.Spec.Taints = append(n.Spec.Taints, Taint{Key: "a", Value: "3", Effect: TaintEffectNoSchedule})
	n.Namespace = "default"
	n.Spec.PodCIDR = "10.0.0.0"
	n.Status.Capacity = ResourceList{"cpu": MustParseQuantity("-1")}
	checkErrs(t, Validate(n),
		wantErr{"spec.taints[2]", FieldValueDuplicate, "taints must be unique by key and effect pair"},
		wantErr{"metadata.namespace", FieldValueForbidden, "not allowed on this type"},
		wantErr{"spec.podCIDR", FieldValueInvalid, "CIDR"},
		wantErr{"status.capacity[cpu]", FieldValueInvalid, "must be greater than or equal to 0"},
	)
}

func TestValidateNamespace(t *testing.T) {
	ns := &Namespace{ObjectMeta: ObjectMeta{Name: "team-a"}}
	SetDefaults(ns)
	if errs := Validate(ns); len(errs) != 0 {
		t.Fatalf("valid namespace: %v", errs)
	}
	ns.Name = "team.a"
	checkErrs(t, Validate(ns), wantErr{"metadata.name", FieldValueInvalid, "a lowercase RFC 1123 label must consist of"})
	ns.Name = strings.Repeat("a", 64)
	checkErrs(t, Validate(ns), wantErr{"metadata.name", FieldValueInvalid, "must be no more than 63 characters"})
}

func TestValidateService(t *testing.T) {
	valid := func() *Service {
		s := &Service{ObjectMeta: ObjectMeta{Name: "web", Namespace: "default"}, Spec: ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []ServicePort{{Name: "http", Port: 80}, {Name: "https", Port: 443, TargetPort: FromString("https")}},
		}}
		SetDefaults(s)
		return s
	}
	if errs := Validate(valid()); len(errs) != 0 {
		t.Fatalf("valid service: %v", errs)
	}
	tests := []struct {
		name   string
		mutate func(*Service)
		want   wantErr
	}{
		{"selector", func(s *Service) { s.Spec.Selector["a b"] = "x" }, wantErr{"spec.selector", FieldValueInvalid, `"a b"`}},
		{"port 0", func(s *Service) { s.Spec.Ports[0].Port = 0 }, wantErr{"spec.ports[0].port", FieldValueInvalid, "must be between 1 and 65535"}},
		{"duplicate port name", func(s *Service) { s.Spec.Ports[1].Name = "http" }, wantErr{"spec.ports[1].name", FieldValueDuplicate, `"http"`}},
		{"port name required with two ports", func(s *Service) { s.Spec.Ports[1].Name = "" }, wantErr{"spec.ports[1].name", FieldValueRequired, ""}},
		{"target port", func(s *Service) { s.Spec.Ports[0].TargetPort = FromInt(70000) }, wantErr{"spec.ports[0].targetPort", FieldValueInvalid, ""}},
		{"protocol", func(s *Service) { s.Spec.Ports[0].Protocol = "tcp" }, wantErr{"spec.ports[0].protocol", FieldValueNotSupported, ""}},
		{"no ports", func(s *Service) { s.Spec.Ports = nil }, wantErr{"spec.ports", FieldValueRequired, ""}},
		{"type", func(s *Service) { s.Spec.Type = "Mesh" }, wantErr{"spec.type", FieldValueNotSupported, ""}},
		{"cluster IP", func(s *Service) { s.Spec.ClusterIP = "10.0.0.300" }, wantErr{"spec.clusterIP", FieldValueInvalid, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := valid()
			tt.mutate(s)
			checkErrs(t, Validate(s), tt.want)
		})
	}
}

func validDeployment() *Deployment {
	d := &Deployment{ObjectMeta: ObjectMeta{Name: "web", Namespace: "default"}, Spec: DeploymentSpec{
		Selector: &LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: PodTemplateSpec{ObjectMeta: ObjectMeta{Labels: map[string]string{"app": "web", "tier": "fe"}},
			Spec: PodSpec{Containers: []Container{{Name: "web", Image: "nginx"}}}},
	}}
	SetDefaults(d)
	return d
}

func TestValidateWorkloads(t *testing.T) {
	if errs := Validate(validDeployment()); len(errs) != 0 {
		t.Fatalf("valid deployment: %v", errs)
	}
	tests := []struct {
		name   string
		mutate func(*Deployment)
		want   wantErr
	}{
		{"selector required", func(d *Deployment) { d.Spec.Selector = nil }, wantErr{"spec.selector", FieldValueRequired, ""}},
		{"selector empty", func(d *Deployment) { d.Spec.Selector = &LabelSelector{} }, wantErr{"spec.selector", FieldValueInvalid, "empty selector is invalid for deployment"}},
		{"selector does not match template", func(d *Deployment) { d.Spec.Template.Labels = map[string]string{"app": "api"} }, wantErr{"spec.template.metadata.labels", FieldValueInvalid, "`selector` does not match template `labels`"}},
		{"selector expression", func(d *Deployment) {
			d.Spec.Selector.MatchExpressions = []LabelSelectorRequirement{{Key: "tier", Operator: OpIn}}
		}, wantErr{"spec.selector.matchExpressions[0].values", FieldValueRequired, ""}},
		{"negative replicas", func(d *Deployment) { d.Spec.Replicas = ptrTo(int32(-1)) }, wantErr{"spec.replicas", FieldValueInvalid, "must be greater than or equal to 0"}},
		{"template spec path", func(d *Deployment) { d.Spec.Template.Spec.Containers[0].Image = "" }, wantErr{"spec.template.spec.containers[0].image", FieldValueRequired, ""}},
		{"template restart policy", func(d *Deployment) { d.Spec.Template.Spec.RestartPolicy = RestartPolicyNever }, wantErr{"spec.template.spec.restartPolicy", FieldValueNotSupported, `"Always"`}},
		{"template labels", func(d *Deployment) { d.Spec.Template.Labels["x"] = "a b" }, wantErr{"spec.template.metadata.labels", FieldValueInvalid, `"a b"`}},
		{"both zero", func(d *Deployment) {
			d.Spec.Strategy.RollingUpdate = &RollingUpdateDeployment{MaxSurge: ptrTo(FromInt(0)), MaxUnavailable: ptrTo(FromString("0%"))}
		}, wantErr{"spec.strategy.rollingUpdate.maxUnavailable", FieldValueInvalid, "may not be 0 when `maxSurge` is 0"}},
		{"bad percentage", func(d *Deployment) { d.Spec.Strategy.RollingUpdate.MaxSurge = ptrTo(FromString("25")) }, wantErr{"spec.strategy.rollingUpdate.maxSurge", FieldValueInvalid, "a valid percent string"}},
		{"over 100%", func(d *Deployment) { d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptrTo(FromString("150%")) }, wantErr{"spec.strategy.rollingUpdate.maxUnavailable", FieldValueInvalid, "must not be greater than 100%"}},
		{"negative surge", func(d *Deployment) { d.Spec.Strategy.RollingUpdate.MaxSurge = ptrTo(FromInt(-1)) }, wantErr{"spec.strategy.rollingUpdate.maxSurge", FieldValueInvalid, "greater than or equal to 0"}},
		{"strategy type", func(d *Deployment) { d.Spec.Strategy.Type = "BlueGreen" }, wantErr{"spec.strategy.type", FieldValueNotSupported, ""}},
		{"Recreate with rollingUpdate", func(d *Deployment) { d.Spec.Strategy.Type = RecreateDeploymentStrategyType }, wantErr{"spec.strategy.rollingUpdate", FieldValueForbidden, ""}},
		{"progress deadline", func(d *Deployment) { d.Spec.MinReadySeconds = 700 }, wantErr{"spec.progressDeadlineSeconds", FieldValueInvalid, "must be greater than minReadySeconds"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := validDeployment()
			tt.mutate(d)
			checkErrs(t, Validate(d), tt.want)
		})
	}

	rs := &ReplicaSet{ObjectMeta: ObjectMeta{Name: "rs", Namespace: "default"}, Spec: ReplicaSetSpec{
		Selector: &LabelSelector{MatchLabels: map[string]string{"app": "x"}},
		Template: PodTemplateSpec{ObjectMeta: ObjectMeta{Labels: map[string]string{"app": "y"}}, Spec: PodSpec{Containers: []Container{{Name: "a", Image: "x"}}}},
	}}
	SetDefaults(rs)
	checkErrs(t, Validate(rs), wantErr{"spec.template.metadata.labels", FieldValueInvalid, "`selector` does not match template `labels`"})

	ds := &DaemonSet{ObjectMeta: ObjectMeta{Name: "ds", Namespace: "default"}, Spec: DaemonSetSpec{
		Selector: &LabelSelector{MatchLabels: map[string]string{"app": "x"}},
		Template: PodTemplateSpec{ObjectMeta: ObjectMeta{Labels: map[string]string{"app": "x"}}, Spec: PodSpec{Containers: []Container{{Name: "a", Image: "x"}}}},
	}}
	SetDefaults(ds)
	if errs := Validate(ds); len(errs) != 0 {
		t.Fatalf("valid daemonset: %v", errs)
	}
	ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptrTo(FromInt(0))
	checkErrs(t, Validate(ds), wantErr{"spec.updateStrategy.rollingUpdate.maxUnavailable", FieldValueInvalid, "may not be 0"})
	ds.Spec.Selector = &LabelSelector{}
	checkErrs(t, Validate(ds), wantErr{"spec.selector", FieldValueInvalid, "empty selector is invalid for daemonset"})
}

func TestValidateEventAndToken(t *testing.T) {
	ev := &Event{ObjectMeta: ObjectMeta{Name: "web.1", Namespace: "default"}}
	SetDefaults(ev)
	checkErrs(t, Validate(ev),
		wantErr{"involvedObject.kind", FieldValueRequired, ""},
		wantErr{"involvedObject.name", FieldValueRequired, ""})
	ev.Type = "Info"
	checkErrs(t, Validate(ev), wantErr{"type", FieldValueNotSupported, `"Normal", "Warning"`})

	tok := &Token{ObjectMeta: ObjectMeta{Name: "abc123"}, Spec: TokenSpec{Role: RoleNode, NodeName: "node1", SecretHash: strings.Repeat("ab", 32)}}
	if errs := Validate(tok); len(errs) != 0 {
		t.Fatalf("valid token: %v", errs)
	}
	tok.Spec.Role = "root"
	tok.Spec.SecretHash = "xyz"
	checkErrs(t, Validate(tok),
		wantErr{"spec.role", FieldValueNotSupported, `"cluster-admin", "node", "developer", "server"`},
		wantErr{"spec.secretHash", FieldValueInvalid, "64 lower case hexadecimal characters"},
		wantErr{"spec.nodeName", FieldValueForbidden, ""})
	tok.Spec = TokenSpec{Role: RoleServer, Namespaces: []string{"a"}, SecretHash: strings.Repeat("AB", 32)}
	checkErrs(t, Validate(tok),
		wantErr{"spec.namespaces", FieldValueForbidden, "developer"},
		wantErr{"spec.secretHash", FieldValueInvalid, "lower case"})
}

func TestValidateUpdate(t *testing.T) {
	t.Run("immutable metadata", func(t *testing.T) {
		old := validPod()
		old.UID = "u1"
		old.CreationTimestamp = &Time{}
		p := validPod()
		p.Name, p.Namespace, p.UID = "other", "kube", "u2"
		checkErrs(t, ValidateUpdate(p, old),
			wantErr{"metadata.name", FieldValueInvalid, "field is immutable"},
			wantErr{"metadata.namespace", FieldValueInvalid, "field is immutable"},
			wantErr{"metadata.uid", FieldValueInvalid, "field is immutable"})
	})
	t.Run("empty uid keeps the old one", func(t *testing.T) {
		old := validPod()
		old.UID = "u1"
		if errs := ValidateUpdate(validPod(), old); len(errs) != 0 {
			t.Fatal(errs)
		}
	})
	t.Run("labels and images may change, tolerations may be added", func(t *testing.T) {
		old := validPod()
		p := validPod()
		p.Labels["version"] = "2"
		p.Spec.Containers[0].Image = "nginx:1.26"
		p.Spec.Tolerations = append(p.Spec.Tolerations, Toleration{Key: "new", Operator: TolerationOpExists})
		p.Status.Phase = PodRunning
		if errs := ValidateUpdate(p, old); len(errs) != 0 {
			t.Fatal(errs)
		}
	})
	t.Run("nil and empty slices are the same spec", func(t *testing.T) {
		old := validPod()
		p := validPod()
		p.Spec.Containers[0].Command = []string{}
		p.Spec.InitContainers = []Container{}
		if errs := ValidateUpdate(p, old); len(errs) != 0 {
			t.Fatal(errs)
		}
	})
	tests := []struct {
		name   string
		mutate func(*Pod)
		want   wantErr
	}{
		{"nodeName only by binding", func(p *Pod) { p.Spec.NodeName = "node1" }, wantErr{"spec.nodeName", FieldValueForbidden, "binding"}},
		{"other spec fields", func(p *Pod) { p.Spec.Containers[0].Env[0].Value = "y" }, wantErr{"spec", FieldValueForbidden, "pod updates may not change fields other than"}},
		{"tolerations may not be removed", func(p *Pod) { p.Spec.Tolerations = nil }, wantErr{"spec.tolerations", FieldValueForbidden, ""}},
		{"tolerations may not be changed", func(p *Pod) { p.Spec.Tolerations[0].Value = "value2" }, wantErr{"spec.tolerations", FieldValueForbidden, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPod()
			tt.mutate(p)
			checkErrs(t, ValidateUpdate(p, validPod()), tt.want)
		})
	}
	t.Run("workload selectors are immutable", func(t *testing.T) {
		d := validDeployment()
		d.Spec.Selector = &LabelSelector{MatchLabels: map[string]string{"tier": "fe"}}
		checkErrs(t, ValidateUpdate(d, validDeployment()), wantErr{"spec.selector", FieldValueInvalid, "field is immutable"})
		d = validDeployment()
		d.Spec.Replicas = ptrTo(int32(5))
		d.Spec.Template.Spec.Containers[0].Image = "nginx:2"
		if errs := ValidateUpdate(d, validDeployment()); len(errs) != 0 {
			t.Fatal(errs)
		}
	})
	t.Run("kind may not change", func(t *testing.T) {
		checkErrs(t, ValidateUpdate(validPod(), validDeployment()), wantErr{"kind", FieldValueInvalid, ""})
	})
}

func TestNameChecks(t *testing.T) {
	tests := []struct {
		fn   func(string) []string
		name string
		good []string
		bad  []string
	}{
		{IsDNS1123Label, "label", []string{"a", "a-b", "0", strings.Repeat("a", 63)}, []string{"", "A", "-a", "a-", "a.b", "a_b", strings.Repeat("a", 64)}},
		{IsDNS1123Subdomain, "subdomain", []string{"a", "a.b", "a-b.c-d", strings.Repeat("a", 63) + "." + strings.Repeat("b", 63)}, []string{"", "a..b", ".a", "a.", "a.-b", "A.b", strings.Repeat("a.", 127) + "a"}},
		{IsQualifiedName, "qualified", []string{"a", "A_b.c-D", "example.com/Name", "k8s.io/a"}, []string{"", "/a", "a/", "a/b/c", "-a", "a b", "Example.com/a", strings.Repeat("a", 64)}},
		{IsValidLabelValue, "label value", []string{"", "a", "A_b.c-D", strings.Repeat("v", 63)}, []string{"-a", "a-", "a b", "a/b", strings.Repeat("v", 64)}},
		{IsEnvVarName, "env", []string{"A", "_a", "a.b-c", "PATH"}, []string{"", "1a", "a b", "a=b"}},
		{IsPortName, "port name", []string{"http", "h2", "web-1"}, []string{"", "1", "HTTP", "-a", "a-", "a--b", "abcdefghijklmnop"}},
	}
	for _, tt := range tests {
		for _, s := range tt.good {
			if msgs := tt.fn(s); msgs != nil {
				t.Errorf("%s %q: %v, want valid", tt.name, s, msgs)
			}
		}
		for _, s := range tt.bad {
			if msgs := tt.fn(s); msgs == nil {
				t.Errorf("%s %q: valid, want an error", tt.name, s)
			}
		}
	}
}

// The older condition-taint names are accepted with a warning naming
// today's key, on pods and on workloads' templates (issue 10 item 10).
func TestDeprecationWarnings(t *testing.T) {
	tol := []Toleration{{Key: "node.alpha.kubernetes.io/notReady", Operator: TolerationOpExists, Effect: TaintEffectNoExecute}, {Key: "k", Operator: TolerationOpExists}}
	pod := &Pod{Spec: PodSpec{Tolerations: tol}}
	w := DeprecationWarnings(pod)
	if len(w) != 1 || !strings.Contains(w[0], "spec.tolerations[0].key") || !strings.Contains(w[0], TaintNodeNotReady) {
		t.Errorf("pod: %q", w)
	}
	ds := &DaemonSet{}
	ds.Spec.Template.Spec.Tolerations = tol
	if w := DeprecationWarnings(ds); len(w) != 1 || !strings.Contains(w[0], "spec.template.spec.tolerations[0].key") {
		t.Errorf("daemon set: %q", w)
	}
	if w := DeprecationWarnings(&Pod{}); w != nil {
		t.Errorf("a pod without older names: %q", w)
	}
}

// kubelet's --register-with-taints syntax, every problem listed.
func TestParseTaints(t *testing.T) {
	ts, err := ParseTaints("dedicated=db:NoSchedule, edge:NoExecute")
	if err != nil || len(ts) != 2 || ts[0] != (Taint{Key: "dedicated", Value: "db", Effect: TaintEffectNoSchedule}) ||
		ts[1] != (Taint{Key: "edge", Effect: TaintEffectNoExecute}) {
		t.Fatalf("ParseTaints = %+v, %v", ts, err)
	}
	if _, err := ParseTaints("a:NoSchedule,a=x:NoSchedule"); err == nil || !strings.Contains(err.Error(), "given already") {
		t.Errorf("the same key and effect twice: %v", err)
	}
	_, err = ParseTaints("nocolon,k=v:Sometimes,bad key:NoSchedule")
	if err == nil {
		t.Fatal("bad taints accepted")
	}
	for _, want := range []string{`"nocolon": want KEY=VALUE:EFFECT`, `"k=v:Sometimes"`, `"bad key:NoSchedule"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// An EndpointSlice (SPEC NET-3) is checked as Kubernetes checks one: every
// problem listed by field path, addresses of the slice's type.
func TestValidateEndpointSlice(t *testing.T) {
	bad := int32(70000)
	es := &EndpointSlice{TypeMeta: TypeMeta{Kind: "EndpointSlice", APIVersion: "discovery.k8s.io/v1"}, ObjectMeta: ObjectMeta{Namespace: "default", Name: "web-1"},
		AddressType: AddressTypeIPv4,
		Endpoints:   []Endpoint{{Addresses: []string{"10.42.0.5"}}, {Addresses: []string{"fd00::1"}}, {}},
		Ports:       []EndpointPort{{Name: "http", Port: &bad, Protocol: "TCP"}, {Name: "http", Protocol: "ICMP"}},
	}
	err := NewInvalid("EndpointSlice", es.Name, Validate(es))
	for _, want := range []string{"endpoints[1].addresses[0]", "endpoints[2].addresses", "ports[0].port", "ports[1].name", "ports[1].protocol"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "endpoints[0]") {
		t.Errorf("a good endpoint refused: %v", err)
	}
	es.AddressType = "IPv5"
	if errs := Validate(es); len(errs) == 0 || !strings.Contains(NewInvalid("EndpointSlice", es.Name, errs).Error(), "addressType") {
		t.Errorf("address type IPv5: %v", errs)
	}
}
