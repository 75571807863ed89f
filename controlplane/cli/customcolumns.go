package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Template output formats of -o, beside json, yaml, wide and name.
const (
	outputJSONPath          = "jsonpath"
	outputJSONPathFile      = "jsonpath-file"
	outputCustomColumns     = "custom-columns"
	outputCustomColumnsFile = "custom-columns-file"
)

// allowedOutputs is kubectl's list, for the error naming a bad -o.
const allowedOutputs = "custom-columns,custom-columns-file,json,jsonpath,jsonpath-file,name,wide,yaml"

// docPrinter prints documents (one object, or a List of them) by a
// template the user gave with -o.
type docPrinter interface {
	printDoc(w io.Writer, doc []byte) error
}

// isTemplateOutput reports whether -o names a template format
// (jsonpath=..., custom-columns=... and their -file forms).
func isTemplateOutput(format string) bool {
	name, _, _ := strings.Cut(format, "=")
	switch name {
	case outputJSONPath, outputJSONPathFile, outputCustomColumns, outputCustomColumnsFile:
		return true
	}
	return false
}

// templatePrinter parses a template format of -o. Each call returns a
// printer of its own: a custom-columns printer prints its header once,
// however many documents it is given (a watch).
func templatePrinter(format string) (docPrinter, error) {
	name, arg, _ := strings.Cut(format, "=")
	if arg == "" {
		switch name {
		case outputJSONPathFile, outputCustomColumnsFile:
			return nil, usagef("%s requires a file name: -o %s=FILE", name, name)
		}
		return nil, usagef("template format specified but no template given: -o %s=TEMPLATE", name)
	}
	switch name {
	case outputJSONPath, outputJSONPathFile:
		tmpl := arg
		if name == outputJSONPathFile {
			b, err := os.ReadFile(arg)
			if err != nil {
				return nil, fmt.Errorf("read the jsonpath template: %w", err)
			}
			tmpl = string(b)
		}
		t, err := parseJSONPath(tmpl)
		if err != nil {
			return nil, usagef("%s", err.Error())
		}
		return jsonPathPrinter{t}, nil
	case outputCustomColumns:
		return parseCustomColumns(arg)
	case outputCustomColumnsFile:
		b, err := os.ReadFile(arg)
		if err != nil {
			return nil, fmt.Errorf("read the custom columns file: %w", err)
		}
		return parseCustomColumnsFile(string(b))
	}
	return nil, usagef("unable to match a printer suitable for the output format %q, allowed formats are: %s", format, allowedOutputs)
}

// jsonPathPrinter prints -o jsonpath: the template on the whole document.
type jsonPathPrinter struct{ t *jsonPathTemplate }

func (p jsonPathPrinter) printDoc(w io.Writer, doc []byte) error {
	v, err := decodeDocument(doc)
	if err != nil {
		return err
	}
	return p.t.execute(w, v)
}

// customColumnsPrinter prints -o custom-columns: a row per object (each
// item of a List), a column per NAME:PATH, <none> where the path reaches
// nothing and the values joined by commas where it reaches several.
type customColumnsPrinter struct {
	names []string
	paths []*jpPath
	tbl   *table
}

// parseCustomColumns reads NAME:PATH,NAME:PATH. A path may be written as
// kubectl accepts it: .metadata.name, metadata.name or {.metadata.name}.
// Every bad column is named, not only the first.
func parseCustomColumns(spec string) (*customColumnsPrinter, error) {
	var names, paths []string
	var problems []string
	for _, col := range splitColumns(spec) {
		name, path, ok := strings.Cut(col, ":")
		if !ok || strings.TrimSpace(name) == "" {
			problems = append(problems, fmt.Sprintf("column %q: expected <header>:<json-path-expr>", col))
			continue
		}
		names = append(names, strings.TrimSpace(name))
		paths = append(paths, path)
	}
	return newCustomColumns(names, paths, problems)
}

// parseCustomColumnsFile reads kubectl's file form: a line of headers and
// a line of paths below them, separated by blanks.
func parseCustomColumnsFile(text string) (*customColumnsPrinter, error) {
	var lines []string
	for l := range strings.SplitSeq(text, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) != 2 {
		return nil, usagef("custom columns file: expected 2 lines (headers, then paths), found %d", len(lines))
	}
	names, paths := strings.Fields(lines[0]), strings.Fields(lines[1])
	if len(names) != len(paths) {
		return nil, usagef("custom columns file: %d headers but %d paths", len(names), len(paths))
	}
	return newCustomColumns(names, paths, nil)
}

func newCustomColumns(names, paths, problems []string) (*customColumnsPrinter, error) {
	p := &customColumnsPrinter{names: names}
	for i, path := range paths {
		jp, err := parseJSONPathExpr(relaxedPath(path))
		if err != nil {
			problems = append(problems, fmt.Sprintf("column %s: %v", names[i], err))
			continue
		}
		p.paths = append(p.paths, jp)
	}
	if len(problems) > 0 {
		return nil, usagef("bad custom columns: %s", strings.Join(problems, "; "))
	}
	if len(names) == 0 {
		return nil, usagef("custom-columns format specified but no custom columns given")
	}
	p.tbl = newTable(names)
	return p, nil
}

// splitColumns splits at the commas that are outside brackets and quotes,
// so that a filter's own commas or quoted names do not end a column.
func splitColumns(spec string) []string {
	var out []string
	depth, start := 0, 0
	scanUnquoted(spec, 0, func(i int, c byte) bool {
		switch c {
		case '[', '(':
			depth++
		case ']', ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, spec[start:i])
				start = i + 1
			}
		}
		return false
	})
	return append(out, spec[start:])
}

// relaxedPath turns "{.a.b}", "a.b" and ".a.b" into ".a.b".
func relaxedPath(p string) string {
	p = strings.TrimSpace(p)
	if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
		p = strings.TrimSpace(p[1 : len(p)-1])
	}
	if p != "" && p[0] != '.' && p[0] != '$' && p[0] != '@' && p[0] != '[' {
		p = "." + p
	}
	return p
}

func (p *customColumnsPrinter) printDoc(w io.Writer, doc []byte) error {
	v, err := decodeDocument(doc)
	if err != nil {
		return err
	}
	objs := []any{v}
	if m, ok := v.(map[string]any); ok && strings.HasSuffix(fmt.Sprint(m["kind"]), "List") {
		items, ok := m["items"].([]any)
		if !ok {
			return errors.New("a List without items")
		}
		objs = items
	}
	rows := make([][]string, 0, len(objs))
	for _, obj := range objs {
		row := make([]string, len(p.paths))
		for i, path := range p.paths {
			var cells []string
			for _, val := range path.eval(obj, obj) {
				cells = append(cells, formatCell(val))
			}
			row[i] = "<none>"
			if len(cells) > 0 {
				row[i] = strings.Join(cells, ",")
			}
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return nil
	}
	return p.tbl.print(w, rows)
}

// formatCell prints a custom-columns cell as kubectl does: maps and lists
// in Go's notation (map[app:web], [a b]) rather than the JSON that
// -o jsonpath prints, and anything else as formatValue.
func formatCell(v any) string {
	switch v.(type) {
	case map[string]any, []any:
		return fmt.Sprint(v)
	}
	return formatValue(v)
}
