package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// GetOptions tune a single-object read.
type GetOptions struct {
	// Consistent makes the read linearizable: the server confirms with the
	// raft leader that it has every write acknowledged before the request.
	Consistent bool
}

// ListOptions tune a list or a watch.
type ListOptions struct {
	LabelSelector string
	FieldSelector string
	// Consistent makes a list linearizable (ignored by watches).
	Consistent bool
}

// Preconditions make a delete conditional on the stored object.
type Preconditions struct {
	ResourceVersion string `json:"resourceVersion,omitempty"`
	UID             string `json:"uid,omitempty"`
}

// PathFor builds the API path of r: the collection when name is "", the
// object otherwise, and its subresource when sub is set. For a namespaced
// resource an empty ns is the all-namespaces collection.
func PathFor(r *api.Resource, ns, name, sub string) string {
	var b strings.Builder
	b.Grow(64)
	if r.Group == "" {
		b.WriteString("/api/")
		b.WriteString(r.Version)
	} else {
		b.WriteString("/apis/")
		b.WriteString(r.Group)
		b.WriteByte('/')
		b.WriteString(r.Version)
	}
	if r.Namespaced && ns != "" {
		b.WriteString("/namespaces/")
		b.WriteString(url.PathEscape(ns))
	}
	b.WriteByte('/')
	b.WriteString(r.Plural)
	if name != "" {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(name))
		if sub != "" {
			b.WriteByte('/')
			b.WriteString(sub)
		}
	}
	return b.String()
}

// ObjectPath is the API path of obj (with sub, when set), using the
// client's namespace when obj has none.
func (c *Client) ObjectPath(obj api.Object, sub string) (string, error) {
	r := api.ResourceOf(obj)
	if r == nil {
		return "", fmt.Errorf("%w: %T", api.ErrUnknownKind, obj)
	}
	m := obj.GetObjectMeta()
	return PathFor(r, c.nsFor(r, m.Namespace), m.Name, sub), nil
}

func (c *Client) nsFor(r *api.Resource, ns string) string {
	if !r.Namespaced {
		return ""
	}
	if ns == "" {
		return c.namespace
	}
	return ns
}

// Get reads one object.
func (c *Client) Get(ctx context.Context, r *api.Resource, ns, name string, opts GetOptions) (api.Object, error) {
	var q url.Values
	if opts.Consistent {
		q = url.Values{"consistent": {"true"}}
	}
	data, _, err := c.Do(ctx, http.MethodGet, PathFor(r, c.nsFor(r, ns), name, ""), q, nil)
	if err != nil {
		return nil, err
	}
	return DecodeObject(r, data)
}

// List reads the objects of r in ns ("" for all namespaces of a namespaced
// resource) and returns them with the resourceVersion the list was read
// at, from which a watch can continue.
func (c *Client) List(ctx context.Context, r *api.Resource, ns string, opts ListOptions) ([]api.Object, string, error) {
	q := listQuery(opts)
	if opts.Consistent {
		q.Set("consistent", "true")
	}
	if !r.Namespaced {
		ns = ""
	}
	data, _, err := c.Do(ctx, http.MethodGet, PathFor(r, ns, "", ""), q, nil)
	if err != nil {
		return nil, "", err
	}
	return DecodeList(r, data)
}

func listQuery(opts ListOptions) url.Values {
	q := url.Values{}
	if opts.LabelSelector != "" {
		q.Set("labelSelector", opts.LabelSelector)
	}
	if opts.FieldSelector != "" {
		q.Set("fieldSelector", opts.FieldSelector)
	}
	return q
}

// Create stores a new object and returns it as stored. An empty kind and
// apiVersion on obj are filled in from its Go type.
func (c *Client) Create(ctx context.Context, obj api.Object) (api.Object, api.Warnings, error) {
	r, body, err := encodeObject(obj)
	if err != nil {
		return nil, nil, err
	}
	m := obj.GetObjectMeta()
	return c.write(ctx, http.MethodPost, r, PathFor(r, c.nsFor(r, m.Namespace), "", ""), body)
}

// Update replaces an object. obj must carry the resourceVersion it was
// read at; a stale one fails with a Conflict (api.IsConflict). Status is
// kept by the server for kinds with a status subresource.
func (c *Client) Update(ctx context.Context, obj api.Object) (api.Object, api.Warnings, error) {
	return c.put(ctx, obj, "")
}

// UpdateStatus replaces an object's status through its status subresource.
func (c *Client) UpdateStatus(ctx context.Context, obj api.Object) (api.Object, api.Warnings, error) {
	return c.put(ctx, obj, "status")
}

func (c *Client) put(ctx context.Context, obj api.Object, sub string) (api.Object, api.Warnings, error) {
	r, body, err := encodeObject(obj)
	if err != nil {
		return nil, nil, err
	}
	m := obj.GetObjectMeta()
	return c.write(ctx, http.MethodPut, r, PathFor(r, c.nsFor(r, m.Namespace), m.Name, sub), body)
}

func (c *Client) write(ctx context.Context, method string, r *api.Resource, path string, body []byte) (api.Object, api.Warnings, error) {
	data, h, err := c.Do(ctx, method, path, nil, body)
	ws := warningsOf(h)
	if err != nil {
		return nil, ws, err
	}
	out, err := DecodeObject(r, data)
	return out, ws, err
}

// encodeObject fills in the type metadata and encodes obj.
func encodeObject(obj api.Object) (*api.Resource, []byte, error) {
	r := api.ResourceOf(obj)
	if r == nil {
		return nil, nil, fmt.Errorf("%w: %T", api.ErrUnknownKind, obj)
	}
	if tm := obj.GetTypeMeta(); tm.Kind == "" || tm.APIVersion == "" {
		tm.Kind, tm.APIVersion = r.Kind, r.APIVersion()
	}
	// The API's own engine (api.Marshal), not encoding/json: the same
	// bytes for API objects at a third less CPU, which a client sharing
	// a machine with servers, or an agent, leaves to them.
	body, err := api.Marshal(obj)
	if err != nil {
		return nil, nil, fmt.Errorf("encode %s: %w", r.Kind, err)
	}
	return r, body, nil
}

// deleteOptions is the body of a conditional delete.
type deleteOptions struct {
	api.TypeMeta       `json:",inline"`
	Preconditions      *Preconditions `json:"preconditions,omitempty"`
	GracePeriodSeconds *int64         `json:"gracePeriodSeconds,omitempty"`
}

// DeleteOptions are what a delete may ask.
type DeleteOptions struct {
	// Preconditions, when set, make the delete happen only if the stored
	// object still has that resourceVersion and UID.
	Preconditions *Preconditions
	// GracePeriodSeconds, for a pod on a node, is how long its containers
	// get to stop (nil: the pod's own period); 0 removes the object at
	// once, without waiting for the node to stop it.
	GracePeriodSeconds *int64
}

// Delete removes an object and returns it as it was at deletion (nil if
// the server replied with a bare Status). With pre set the delete happens
// only if the stored object still has that resourceVersion and UID. A pod
// on a node comes back marked terminating: its node removes it once it
// has stopped it.
func (c *Client) Delete(ctx context.Context, r *api.Resource, ns, name string, pre *Preconditions) (api.Object, error) {
	return c.DeleteWith(ctx, r, ns, name, DeleteOptions{Preconditions: pre})
}

// DeleteWith is Delete with every option.
func (c *Client) DeleteWith(ctx context.Context, r *api.Resource, ns, name string, opts DeleteOptions) (api.Object, error) {
	var body []byte
	if opts.Preconditions != nil || opts.GracePeriodSeconds != nil {
		var err error
		body, err = json.Marshal(deleteOptions{
			TypeMeta:           api.TypeMeta{Kind: "DeleteOptions", APIVersion: "v1"},
			Preconditions:      opts.Preconditions,
			GracePeriodSeconds: opts.GracePeriodSeconds,
		})
		if err != nil {
			return nil, fmt.Errorf("encode delete options: %w", err)
		}
	}
	data, _, err := c.Do(ctx, http.MethodDelete, PathFor(r, c.nsFor(r, ns), name, ""), nil, body)
	if err != nil {
		return nil, err
	}
	if isStatus(data) {
		return nil, nil
	}
	return DecodeObject(r, data)
}

// Evict asks for pod ns/name to be evicted (POST pods/NAME/eviction): a
// graceful delete if its disruption budget allows it, else a 429 whose
// causes name the budget.
func (c *Client) Evict(ctx context.Context, ns, name string, grace *int64) error {
	r := api.ResourceForKind("Pod")
	ns = c.nsFor(r, ns)
	ev := &api.Eviction{TypeMeta: api.TypeMeta{Kind: "Eviction", APIVersion: "policy/v1"}, ObjectMeta: api.ObjectMeta{Name: name, Namespace: ns}}
	if grace != nil {
		ev.DeleteOptions = &api.DeleteOptionsBody{GracePeriodSeconds: grace}
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode eviction: %w", err)
	}
	_, _, err = c.Do(ctx, http.MethodPost, PathFor(r, ns, name, "eviction"), nil, body)
	return err
}

// Bind assigns pod ns/pod to node through the binding subresource, the
// only way a scheduler changes a pod.
func (c *Client) Bind(ctx context.Context, ns, pod, node string) error {
	r := api.ResourceForKind("Pod")
	ns = c.nsFor(r, ns)
	body, err := json.Marshal(&api.Binding{
		TypeMeta:   api.TypeMeta{Kind: "Binding", APIVersion: "v1"},
		ObjectMeta: api.ObjectMeta{Name: pod, Namespace: ns},
		Target:     api.ObjectReference{Kind: "Node", Name: node},
	})
	if err != nil {
		return fmt.Errorf("encode binding: %w", err)
	}
	_, _, err = c.Do(ctx, http.MethodPost, PathFor(r, ns, pod, "binding"), nil, body)
	return err
}

// DecodeObject reads one object of resource r from a reply. Decoding is
// lenient on purpose: a newer server may send fields this build does not
// know, and the client must still work. Missing type metadata (list items
// often carry none) is filled in from r.
func DecodeObject(r *api.Resource, data []byte) (api.Object, error) {
	obj := r.New()
	if err := api.Unmarshal(data, obj); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadReply, r.Kind, err)
	}
	if tm := obj.GetTypeMeta(); tm.Kind == "" {
		tm.Kind, tm.APIVersion = r.Kind, r.APIVersion()
	}
	return obj, nil
}

// rawList is a list reply with its items left undecoded.
type rawList struct {
	Metadata api.ListMeta      `json:"metadata"`
	Items    []json.RawMessage `json:"items"`
}

// DecodeList reads a list reply of resource r: its items and the list's
// resourceVersion.
func DecodeList(r *api.Resource, data []byte) ([]api.Object, string, error) {
	var l rawList
	if err := api.Unmarshal(data, &l); err != nil {
		return nil, "", fmt.Errorf("%w: %sList: %w", ErrBadReply, r.Kind, err)
	}
	out := make([]api.Object, 0, len(l.Items))
	for _, it := range l.Items {
		obj, err := DecodeObject(r, it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, obj)
	}
	return out, l.Metadata.ResourceVersion, nil
}

// isStatus reports whether a reply body is a Status rather than an object.
func isStatus(data []byte) bool {
	var tm api.TypeMeta
	return json.Unmarshal(data, &tm) == nil && tm.Kind == "Status"
}
