package api

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSeedManifests loads every example manifest of seed 000 chapter 14 the
// way `outpost apply -f` does: decode, default, validate. Kubernetes
// manifests must load as they are; fields outpost does not act on only
// warn.
func TestSeedManifests(t *testing.T) {
	files, err := filepath.Glob("testdata/seeds/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 12 {
		t.Fatalf("found %d seed manifests, want the chapter 14 examples", len(files))
	}
	pods := 0
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			objs, warns, err := DecodeYAMLOrJSON(data)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if len(objs) == 0 {
				t.Fatal("no objects")
			}
			for i, obj := range objs {
				if _, ok := obj.(*Pod); ok {
					pods++
				}
				// The server puts objects without a namespace into the
				// request's namespace.
				if ResourceOf(obj).Namespaced && obj.GetObjectMeta().Namespace == "" {
					obj.GetObjectMeta().Namespace = "default"
				}
				SetDefaults(obj)
				if errs := Validate(obj); len(errs) > 0 {
					t.Errorf("object %d (%s): %v", i, obj.GetObjectMeta().Name, NewInvalid(obj.GetTypeMeta().Kind, obj.GetObjectMeta().Name, errs))
				}
				if filepath.Base(f) != "14.4.4-hello-pod.yaml" && len(warns[i]) > 0 {
					t.Errorf("object %d: unexpected warnings %q", i, warns[i])
				}
			}
		})
	}
	if pods < 15 {
		t.Errorf("loaded %d pods, want every pod example of chapter 14", pods)
	}
}

func TestSeedHelloPod(t *testing.T) {
	data, err := os.ReadFile("testdata/seeds/14.4.4-hello-pod.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, warns, err := DecodeYAMLOrJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	want := Warnings{
		"spec.containers[0].securityContext: accepted but not acted on by outpost",
		"spec.containers[0].terminationMessagePath: accepted but not acted on by outpost",
		"spec.serviceAccount: accepted but not acted on by outpost",
	}
	if len(warns) != 1 || !slices.Equal(warns[0], want) {
		t.Errorf("warnings %q\nwant %q", warns, want)
	}
	p := objs[0].(*Pod)
	c := p.Spec.Containers[0]
	if c.Image != "docker.io/ocpqe/hello-pod:latest" || c.ImagePullPolicy != PullIfNotPresent ||
		len(c.Ports) != 1 || c.Ports[0].ContainerPort != 8080 || c.Ports[0].Protocol != ProtocolTCP {
		t.Errorf("container %+v", c)
	}
	if p.Spec.RestartPolicy != RestartPolicyAlways || p.Spec.NodeSelector["env"] != "test" || p.Spec.NodeSelector["os"] != "fedora" {
		t.Errorf("spec %+v", p.Spec)
	}
	// An explicit pull policy wins over the :latest default.
	SetDefaults(p)
	if p.Spec.Containers[0].ImagePullPolicy != PullIfNotPresent {
		t.Errorf("defaulting replaced the given imagePullPolicy")
	}
}
