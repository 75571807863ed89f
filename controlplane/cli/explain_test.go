package cli

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

func TestExplain(t *testing.T) {
	res := runCLI(t, t.Context(), "", "explain", "pods")
	if res.code != 0 || !strings.HasPrefix(res.stdout, "KIND:       Pod\nVERSION:    v1\n\nDESCRIPTION:\n    Pod is ") {
		t.Fatalf("explain pods: code %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	for _, want := range []string{"\nFIELDS:\n  apiVersion\t<string>\n", "\n  metadata\t<ObjectMeta>\n", "\n  spec\t<PodSpec>\n", "\n  status\t<PodStatus>\n"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("explain pods lacks %q:\n%s", want, res.stdout)
		}
	}

	expect(t, "a field", runCLI(t, t.Context(), "", "explain", "pod.spec.containers.ports"), 0, `KIND:       Pod
VERSION:    v1

FIELD: ports <[]ContainerPort>

DESCRIPTION:
    Ports the container listens on; informational, plus host ports.

FIELDS:
  containerPort	<integer>
    The port number the container listens on.

  hostIP	<string>
    The node address a hostPort binds to; every address when empty.

  hostPort	<integer>
    A port of the node forwarded to the container.

  name	<string>
    A name for the port, which a Service's targetPort may use.

  protocol	<string>
    TCP (the default), UDP or SCTP.
`, "")

	for path, want := range map[string]string{
		"pod.spec.containers.resources.limits":          "FIELD: limits <map[string]Quantity>\n",
		"deploy.spec.strategy.rollingUpdate.maxSurge":   "FIELD: maxSurge <IntOrString>\n",
		"pod.metadata.creationTimestamp":                "FIELD: creationTimestamp <string>\n",
		"deployments.spec.template.spec.nodeSelector":   "FIELD: nodeSelector <map[string]string>\n",
		"po.spec.serviceAccountName":                    "FIELD: serviceAccountName <ignored>\n\nDESCRIPTION:\n    A Kubernetes field outpost accepts and does not act on",
		"svc.spec.ports.targetPort":                     "FIELD: targetPort <IntOrString>\n",
		"Deployment.spec.template.spec.containers.name": "FIELD: name <string>\n\nDESCRIPTION:\n    The container's name, unique in the pod.\n",
	} {
		res := runCLI(t, t.Context(), "", "explain", path)
		if res.code != 0 || !strings.Contains(res.stdout, want) {
			t.Errorf("explain %s: code %d\n%s%s\nwant %q", path, res.code, res.stdout, res.stderr, want)
		}
	}

	expect(t, "unknown field", runCLI(t, t.Context(), "", "explain", "pod.spec.nodeNmae"), 1, "",
		"error: field \"spec.nodeNmae\" does not exist in Pod (PodSpec)\n")
	expect(t, "case", runCLI(t, t.Context(), "", "explain", "pod.spec.NodeName"), 1, "",
		"error: field \"spec.NodeName\" does not exist in Pod (PodSpec); did you mean \"nodeName\"?\n")
	expect(t, "below a string", runCLI(t, t.Context(), "", "explain", "pod.spec.nodeName.x"), 1, "",
		"error: field \"spec.nodeName.x\" does not exist in Pod: the field before it is of type string, which has no fields\n")
	expect(t, "below an ignored field", runCLI(t, t.Context(), "", "explain", "pod.spec.securityContext.runAsUser"), 1, "",
		"error: field \"spec.securityContext.runAsUser\" does not exist in Pod: the field before it is one outpost does not act on\n")
	expect(t, "unknown kind", runCLI(t, t.Context(), "", "explain", "gizmos.spec"), 1, "",
		"error: the server doesn't have a resource type \"gizmos\"\n")

	rec := runCLI(t, t.Context(), "", "explain", "deployment.spec", "--recursive")
	for _, want := range []string{"\nFIELDS:\n  minReadySeconds\t<integer>\n", "\n  template\t<PodTemplateSpec>\n    metadata\t<ObjectMeta>\n", "\n      containers\t<[]Container>\n        args\t<[]string>\n"} {
		if rec.code != 0 || !strings.Contains(rec.stdout, want) {
			t.Errorf("explain --recursive lacks %q:\n%s%s", want, rec.stdout, rec.stderr)
		}
	}
}

// explain lists every field of every kind with a type, and exactly the
// fields the strict decoder accepts: each listed name decodes, and a name
// not listed is refused as unknown.
func TestExplainMatchesTheDecoder(t *testing.T) {
	line := regexp.MustCompile(`(?m)^  (\S+)\t<([^>]+)>$`)
	for _, r := range api.Resources {
		res := runCLI(t, t.Context(), "", "explain", r.Singular+".spec")
		path := "spec"
		if res.code != 0 || !strings.Contains(res.stdout, "\nFIELDS:\n") {
			// Kinds without a spec (Event, Token, ...) or with an
			// empty one: their top level.
			res = runCLI(t, t.Context(), "", "explain", r.Singular)
			path = ""
		}
		listed := line.FindAllStringSubmatch(res.stdout, -1)
		if res.code != 0 || len(listed) == 0 {
			t.Errorf("explain %s: code %d, no fields\n%s%s", r.Singular, res.code, res.stdout, res.stderr)
			continue
		}
		want := explainable(reflect.TypeOf(r.New()).Elem())
		if path != "" {
			f, _ := schemaField(reflect.TypeOf(r.New()).Elem(), path)
			want = explainable(f)
		}
		if len(listed) != len(want) {
			t.Errorf("explain %s lists %d fields, the schema has %d", r.Singular, len(listed), len(want))
		}
		for _, m := range listed {
			name, typ := m[1], m[2]
			if typ == "" {
				t.Errorf("%s.%s has no type", r.Kind, name)
			}
			body := `{"apiVersion":"` + r.APIVersion() + `","kind":"` + r.Kind + `","metadata":{"name":"x"},"` + name + `":null}`
			if path != "" {
				body = `{"apiVersion":"` + r.APIVersion() + `","kind":"` + r.Kind + `","metadata":{"name":"x"},"spec":{"` + name + `":null}}`
			}
			if _, err := api.DecodeInto([]byte(body), r.New()); err != nil {
				t.Errorf("%s: explain lists %s.%s but the decoder refuses it: %v", r.Kind, path, name, err)
			}
		}
		body := `{"apiVersion":"` + r.APIVersion() + `","kind":"` + r.Kind + `","metadata":{"name":"x"},"spec":{"notAField":1}}`
		if path == "" {
			body = `{"apiVersion":"` + r.APIVersion() + `","kind":"` + r.Kind + `","metadata":{"name":"x"},"notAField":1}`
		}
		if _, err := api.DecodeInto([]byte(body), r.New()); err == nil || !strings.Contains(err.Error(), "notAField") {
			t.Errorf("%s: the decoder took a field explain does not list: %v", r.Kind, err)
		}
	}
}

// TestExplainDescribesCommonKinds: every field of the kinds a newcomer
// meets first (Pod, Deployment, DaemonSet, Service, Node: spec, status and
// what is below them) has a description, not "<no description>".
func TestExplainDescribesCommonKinds(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(typ reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		st := elemStruct(typ)
		if st == nil || seen[st] {
			return
		}
		seen[st] = true
		for _, f := range explainable(typ) {
			if d := fieldDescription(st, f.Name, f.Type); d == "<no description>" {
				t.Errorf("explain %s.%s (%s.%s) has no description", path, f.Name, st.Name(), f.Name)
			}
			if f.Type != nil && f.Name != "metadata" {
				walk(f.Type, path+"."+f.Name)
			}
		}
	}
	for _, k := range []string{"Pod", "Deployment", "DaemonSet", "Service", "Node"} {
		r := api.ResourceForKind(k)
		walk(reflect.TypeOf(r.New()).Elem(), r.Plural)
	}
	for path, want := range map[string]string{
		"deployment.spec.strategy.type":               "Recreate",
		"deploy.spec.strategy.rollingUpdate.maxSurge": "25%",
		"pods.status.phase":                           "Pending",
		"pods.status.containerStatuses.restartCount":  "restarted",
		"nodes.status.allocatable":                    "capacity",
		"nodes.status.conditions.type":                "MemoryPressure",
		"deploy.status.conditions.lastTransitionTime": "last changed",
	} {
		res := runCLI(t, t.Context(), "", "explain", path)
		if res.code != 0 || !strings.Contains(res.stdout, want) {
			t.Errorf("explain %s: code %d, want %q in\n%s%s", path, res.code, want, res.stdout, res.stderr)
		}
	}
}
