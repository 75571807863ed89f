package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// manifest is one object read from a file, kept as generic JSON so that
// every field the user wrote reaches the server, known to this build or
// not.
type manifest struct {
	source    string // the file, or "STDIN"
	obj       map[string]any
	r         *api.Resource
	name      string
	namespace string // as written; "" when the manifest names none
}

// ref is "pod/x", for messages.
func (m *manifest) ref() string {
	name := m.name
	if name == "" {
		name = "<generated>"
	}
	return refName(m.r, name)
}

// fileFlags are -f and -R, shared by apply, create and delete.
type fileFlags struct {
	files     []string
	recursive bool
}

// readManifests reads every file, directory and "-" (stdin) named by -f.
// A file that cannot be read or parsed is reported in errs and the others
// are still returned, so that one bad file does not hide the rest.
func readManifests(ff fileFlags, stdin io.Reader) (ms []manifest, errs []error) {
	for _, f := range ff.files {
		if f == "-" {
			data, err := io.ReadAll(stdin)
			if err != nil {
				errs = append(errs, fmt.Errorf("read stdin: %w", err))
				continue
			}
			got, perrs := parseManifests("STDIN", data)
			ms, errs = append(ms, got...), append(errs, perrs...)
			continue
		}
		paths, err := expandPath(f, ff.recursive)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				errs = append(errs, fmt.Errorf("read %s: %w", p, err))
				continue
			}
			got, perrs := parseManifests(p, data)
			ms, errs = append(ms, got...), append(errs, perrs...)
		}
	}
	return ms, errs
}

// readObjects is readManifests for a verb that needs at least one object:
// files that hold none (empty, or only comments) are an error, as in
// kubectl, rather than a silent success. Unreadable files are reported in
// errs, not as that error.
func readObjects(ff fileFlags, stdin io.Reader, verb string) ([]manifest, []error, error) {
	ms, errs := readManifests(ff, stdin)
	if len(ms) == 0 && len(errs) == 0 {
		return nil, nil, fmt.Errorf("%w %s", errNoObjects, verb)
	}
	return ms, errs, nil
}

// expandPath turns a directory into its .yaml, .yml and .json files, in
// name order, descending into subdirectories with -R.
func expandPath(p string, recursive bool) ([]string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("the path %q does not exist: %w", p, err)
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	var out []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != p && !recursive {
				return filepath.SkipDir
			}
			return nil
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read directory %s: %w", p, err)
	}
	slices.Sort(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("no manifests (.yaml, .yml, .json) in directory %s", p)
	}
	return out, nil
}

// parseManifests splits a YAML or JSON stream into objects, expanding a
// `kind: List` into its items. Its errors are the client's own (the file
// is wrong), never the server's, even though the YAML conversion they come
// from is shared with the server.
func parseManifests(source string, data []byte) ([]manifest, []error) {
	docs, err := api.YAMLDocuments(data)
	if err != nil {
		detail := err.Error()
		if se, ok := statusOf(err); ok {
			detail = se.Status.Message
		}
		return nil, []error{fmt.Errorf("%w %s: %s", errParse, source, detail)}
	}
	var out []manifest
	var errs []error
	for i, doc := range docs {
		if what := nonObject(doc); what != "" {
			errs = append(errs, fmt.Errorf("%w %s: YAML document %d is %s, not a Kubernetes object (it has no apiVersion or kind)", errParse, source, i+1, what))
			continue
		}
		obj, err := decodeJSONMap(doc)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w %s: YAML document %d: %w", errParse, source, i+1, err))
			continue
		}
		if obj["kind"] == "List" {
			items, _ := obj["items"].([]any)
			for _, it := range items {
				m, ok := it.(map[string]any)
				if !ok {
					errs = append(errs, fmt.Errorf("%w %s: a List item is not an object", errParse, source))
					continue
				}
				mf, err := newManifest(source, m)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				out = append(out, mf)
			}
			continue
		}
		mf, err := newManifest(source, obj)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, mf)
	}
	return out, errs
}

// nonObject names what a converted document is when it is not a JSON
// object ("the text \"hello world\"", "a list"), or returns "".
func nonObject(doc []byte) string {
	doc = bytes.TrimSpace(doc)
	if len(doc) == 0 || doc[0] == '{' {
		return ""
	}
	switch doc[0] {
	case '"':
		const most = 40
		if len(doc) > most {
			return fmt.Sprintf("the text %s...", doc[:most])
		}
		return "the text " + string(doc)
	case '[':
		return "a list"
	case 't', 'f':
		return "a boolean"
	}
	return "the number " + string(doc)
}

// newManifest checks what the CLI itself needs of an object: a kind the
// API serves, in its apiVersion. Everything else is the server's to judge.
func newManifest(source string, obj map[string]any) (manifest, error) {
	kind, _ := obj["kind"].(string)
	apiVersion, _ := obj["apiVersion"].(string)
	switch {
	case kind == "":
		return manifest{}, fmt.Errorf("error validating %q: kind not set", source)
	case apiVersion == "":
		return manifest{}, fmt.Errorf("error validating %q: apiVersion not set", source)
	}
	r := api.ResourceForKind(kind)
	if r == nil || r.APIVersion() != apiVersion {
		return manifest{}, fmt.Errorf("error validating %q: no matches for kind %q in version %q", source, kind, apiVersion)
	}
	md, _ := obj["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	if !r.Namespaced && ns != "" {
		// A cluster-scoped object has no namespace; Kubernetes' API
		// server drops one a manifest gives (OpenShift's documents give
		// openshift-machine-config-operator to cluster objects), and so
		// does outpost, rather than refuse the manifest.
		delete(md, "namespace")
		ns = ""
	}
	return manifest{source: source, obj: obj, r: r, name: name, namespace: ns}, nil
}

// decodeJSONMap decodes a JSON object keeping numbers as written, so that
// a value the user wrote compares equal to the same value stored.
func decodeJSONMap(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %w", errBadJSON, err)
	}
	if m == nil {
		return nil, fmt.Errorf("%w: not an object", errBadJSON)
	}
	return m, nil
}

// namespaceFor is where a manifest's object goes: the namespace it names,
// else the one of -n or the configuration. An explicit -n that disagrees
// with the manifest is an error, as in kubectl.
func namespaceFor(m *manifest, flagNS, defaultNS string) (string, error) {
	if !m.r.Namespaced {
		return "", nil
	}
	if m.namespace != "" {
		if flagNS != "" && flagNS != m.namespace {
			return "", fmt.Errorf("the namespace from the provided object %q does not match the namespace %q. You must pass '--namespace=%s' to perform this operation",
				m.namespace, flagNS, m.namespace)
		}
		return m.namespace, nil
	}
	return defaultNS, nil
}
