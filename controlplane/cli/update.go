package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// rawPath is the API path of one object; ns is ignored for cluster-scoped
// kinds.
func rawPath(r *api.Resource, ns, name string) string {
	if !r.Namespaced {
		ns = ""
	}
	return client.PathFor(r, ns, name, "")
}

// getRaw reads one object as decoded JSON with a consistent read, so that
// a change is computed against the latest write.
func getRaw(ctx context.Context, cl *client.Client, r *api.Resource, ns, name string) (map[string]any, error) {
	data, _, err := cl.Do(ctx, http.MethodGet, rawPath(r, ns, name), url.Values{"consistent": {"true"}}, nil)
	if err != nil {
		return nil, err
	}
	return decodeJSONMap(data)
}

// updateRaw reads an object raw, lets change edit it in place and writes
// it back carrying the resourceVersion it read, so the write is
// conditional; a Conflict means someone wrote in between, and the whole
// read-change-write starts again from the newer object (change must not
// keep state across calls). change reports whether it changed anything:
// nothing changed, nothing is written. Working on raw JSON keeps fields
// this build does not know. updateRaw returns the object as it was last
// read (or written) and whether it wrote.
func updateRaw(ctx context.Context, cl *client.Client, r *api.Resource, ns, name string, change func(obj map[string]any) (bool, error)) (map[string]any, bool, error) {
	path := rawPath(r, ns, name)
	for range applyAttempts {
		obj, err := getRaw(ctx, cl, r, ns, name)
		if err != nil {
			return nil, false, err
		}
		changed, err := change(obj)
		if err != nil || !changed {
			return obj, false, err
		}
		body, err := json.Marshal(obj)
		if err != nil {
			return nil, false, fmt.Errorf("encode %s: %w", refName(r, name), err)
		}
		data, _, err := cl.Do(ctx, http.MethodPut, path, nil, body)
		if api.IsConflict(err) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		if stored, err := decodeJSONMap(data); err == nil {
			return stored, true, nil
		}
		// The write succeeded; a reply that does not decode changes
		// nothing about that.
		return obj, true, nil
	}
	return nil, false, fmt.Errorf("%s kept changing; gave up after %d attempts", refName(r, name), applyAttempts)
}

// childMap returns m[k] as a map, creating it when absent or not a map.
func childMap(m map[string]any, k string) map[string]any {
	c, ok := m[k].(map[string]any)
	if !ok {
		c = map[string]any{}
		m[k] = c
	}
	return c
}

// nestedMap follows keys through nested maps without creating anything;
// nil when a step is missing.
func nestedMap(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		next, ok := m[k].(map[string]any)
		if !ok {
			return nil
		}
		m = next
	}
	return m
}
