package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// YAMLDocuments splits a multi-document YAML stream at its "---" lines and
// converts each document to JSON, leaving out empty ones (only comments or
// white space). JSON input is YAML too and comes back as one document.
// A key given twice in one mapping is an error, as in kubectl: the YAML
// spec forbids it, and silently keeping the last value hides typos. Errors
// are BadRequest *StatusErrors naming the document and the line in data.
func YAMLDocuments(data []byte) ([][]byte, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var docs [][]byte
	start, startLine, line := 0, 1, 1
	flush := func(end int) error {
		doc := data[start:end]
		if len(bytes.TrimSpace(doc)) == 0 {
			return nil
		}
		j, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return NewBadRequest(fmt.Sprintf("YAML document %d (from line %d): %s", len(docs)+1, startLine, yamlError(doc, startLine, err)))
		}
		if t := bytes.TrimSpace(j); len(t) == 0 || string(t) == "null" {
			return nil
		}
		docs = append(docs, j)
		return nil
	}
	for i := 0; i < len(data); {
		end := bytes.IndexByte(data[i:], '\n')
		next := len(data)
		if end >= 0 {
			next = i + end + 1
		}
		if isDocumentSeparator(data[i:next]) {
			if err := flush(i); err != nil {
				return nil, err
			}
			start, startLine = next, line+1
		}
		i = next
		line++
	}
	if err := flush(len(data)); err != nil {
		return nil, err
	}
	return docs, nil
}

// yamlError rewrites a conversion error of doc, which starts at line
// startLine of its stream, so that its line numbers count from the start
// of the stream and it fits on one line. Only failures pay for this: doc
// is parsed again behind startLine-1 empty lines.
func yamlError(doc []byte, startLine int, err error) string {
	if startLine > 1 {
		padded := make([]byte, 0, startLine-1+len(doc))
		padded = append(padded, bytes.Repeat([]byte{'\n'}, startLine-1)...)
		padded = append(padded, doc...)
		if _, perr := yaml.YAMLToJSONStrict(padded); perr != nil {
			err = perr
		}
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), ":\n", ": ")), " ")
}

// isDocumentSeparator reports whether line is "---", alone or followed by
// white space or a comment.
func isDocumentSeparator(line []byte) bool {
	if !bytes.HasPrefix(line, []byte("---")) {
		return false
	}
	rest := bytes.TrimSpace(line[3:])
	return len(rest) == 0 || rest[0] == '#'
}

// DecodeYAMLOrJSON decodes every object of a YAML or JSON stream, as
// `outpost apply -f` reads a file. A v1 List is expanded into its items.
// The warnings are per object, in the same order.
func DecodeYAMLOrJSON(data []byte) ([]Object, []Warnings, error) {
	docs, err := YAMLDocuments(data)
	if err != nil {
		return nil, nil, err
	}
	var objs []Object
	var warns []Warnings
	add := func(doc []byte, where string) error {
		obj, w, err := Decode(doc)
		if err != nil {
			if se, ok := err.(*StatusError); ok && where != "" {
				se.Status.Message = where + ": " + se.Status.Message
			}
			return err
		}
		objs = append(objs, obj)
		warns = append(warns, w)
		return nil
	}
	for i, doc := range docs {
		where := fmt.Sprintf("document %d", i+1)
		var list struct {
			TypeMeta `json:",inline"`
			Items    []json.RawMessage `json:"items"`
		}
		if json.Unmarshal(doc, &list) == nil && list.Kind == "List" {
			for j, item := range list.Items {
				if err := add(item, fmt.Sprintf("%s, item %d", where, j)); err != nil {
					return nil, nil, err
				}
			}
			continue
		}
		if len(docs) == 1 {
			where = ""
		}
		if err := add(doc, where); err != nil {
			return nil, nil, err
		}
	}
	return objs, warns, nil
}
