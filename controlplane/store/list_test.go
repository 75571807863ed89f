package store

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

func TestList(t *testing.T) {
	h := newHarness(t, Options{})
	for _, ns := range []string{"b", "a"} {
		h.mustCreate(newNamespace(ns))
	}
	h.mustCreate(newPod("b", "z", "n1", map[string]string{"app": "web"}))
	h.mustCreate(newPod("a", "y", "n2", map[string]string{"app": "web"}))
	h.mustCreate(newPod("a", "x", "", map[string]string{"app": "db"}))
	h.mustCreate(newPod("b", "w", "n1", map[string]string{"app": "db"}))
	h.mustCreate(newNode("n1"))

	tests := []struct {
		name      string
		r         *api.Resource
		namespace string
		label     map[string]string
		field     string
		want      string
	}{
		{name: "all pods sorted", r: rPods, want: "a/x a/y b/w b/z"},
		{name: "one namespace", r: rPods, namespace: "b", want: "b/w b/z"},
		{name: "label", r: rPods, label: map[string]string{"app": "web"}, want: "a/y b/z"},
		{name: "node index", r: rPods, field: "spec.nodeName=n1", want: "b/w b/z"},
		{name: "unscheduled", r: rPods, field: "spec.nodeName=", want: "a/x"},
		{name: "node and namespace", r: rPods, namespace: "a", field: "spec.nodeName=n2", want: "a/y"},
		{name: "node and label", r: rPods, label: map[string]string{"app": "db"}, field: "spec.nodeName=n1", want: "b/w"},
		{name: "namespace by field", r: rPods, field: "metadata.namespace=a", want: "a/x a/y"},
		{name: "not on a node", r: rPods, field: "spec.nodeName!=n1", want: "a/x a/y"},
		{name: "namespaces", r: rNamespaces, want: "a b"},
		{name: "cluster-scoped ignores namespace", r: rNodes, namespace: "a", want: "n1"},
		{name: "none", r: rEvents, want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var opts ListOptions
			if tc.label != nil {
				opts.Label = api.SelectorFromSet(tc.label)
			}
			if tc.field != "" {
				f, err := api.ParseFieldSelector(tc.r, tc.field)
				if err != nil {
					t.Fatal(err)
				}
				opts.Field = f
			}
			items, rv, err := h.s.List(tc.r, tc.namespace, opts)
			if err != nil {
				t.Fatal(err)
			}
			if rv != h.idx {
				t.Fatalf("rv %d, want %d", rv, h.idx)
			}
			var got []string
			for _, it := range items {
				m := it.Object.GetObjectMeta()
				if m.Namespace != "" {
					got = append(got, m.Namespace+"/"+m.Name)
				} else {
					got = append(got, m.Name)
				}
				if _, raw, _ := h.s.Get(tc.r, m.Namespace, m.Name); string(raw) != string(it.Raw) {
					t.Fatal("list item JSON differs from Get")
				}
			}
			if strings.Join(got, " ") != tc.want {
				t.Fatalf("got %q, want %q", strings.Join(got, " "), tc.want)
			}
		})
	}
	if _, _, err := h.s.List(&api.Resource{Plural: "widgets"}, "", ListOptions{}); err == nil {
		t.Fatal("list of an unknown resource succeeded")
	}
}

// TestConcurrentReads reads while Apply runs (under -race this also
// checks that Apply never changes an object a reader holds): every List
// is a consistent cut, no item newer than the list's resourceVersion.
func TestConcurrentReads(t *testing.T) {
	s := New(Options{})
	log := commandLog(11, 800)
	ctx := ctxT(t)
	ch, err := s.Watch(ctx, rPods, "", ListOptions{}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	errc := make(chan error, 3)
	go func() {
		for range ch {
		}
	}()
	for range 2 {
		go func() {
			for {
				select {
				case <-stop:
					errc <- nil
					return
				default:
				}
				items, rv, err := s.List(rPods, "", ListOptions{})
				if err != nil {
					errc <- err
					return
				}
				for _, it := range items {
					if _, err := encode(it.Object); err != nil {
						errc <- err
						return
					}
					if v, _ := strconv.ParseUint(it.Object.GetObjectMeta().ResourceVersion, 10, 64); v > rv {
						errc <- fmt.Errorf("item at %d in a list at %d", v, rv)
						return
					}
				}
			}
		}()
	}
	applyLog(t, s, log, 1)
	close(stop)
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}
