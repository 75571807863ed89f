package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// diffFailed is diff's exit code for an error, as kubectl's: 0 means no
// differences and 1 differences.
const diffFailed = 2

func newDiffCommand(o *options) *cobra.Command {
	var ff fileFlags
	cmd := &cobra.Command{
		Use:   "diff -f FILE|DIR|-",
		Short: "Show what apply would change, as a unified diff",
		Long: "diff compares each object of the manifests as it is now (LIVE) with what `outpost apply`\n" +
			"would store (MERGED), computed by apply's own merge, and prints the differences as a\n" +
			"unified diff of their YAML; an object that does not exist yet shows in full. Nothing\n" +
			"is written. A manifest is checked by the server's strict decoder as apply's is: an\n" +
			"unknown field is an error, and fields outpost accepts but does not store are left\n" +
			"out. Fields the server would default on write are not predicted.\n\n" +
			"Exit status: 0 no differences; 1 differences; 2 an error (as kubectl diff).",
		Example: `  outpost diff -f web.yaml
  outpost diff -f manifests/ -R
  outpost diff -f web.yaml && echo "nothing to apply"`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return &exitCodeError{code: diffFailed, msg: "error: no arguments; name the manifests with -f"}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(ff.files) == 0 {
				return &exitCodeError{code: diffFailed, msg: "error: must specify one of -f"}
			}
			var problems []string
			fail := func(err error) { problems = append(problems, FormatError(err)) }
			ms, errs, err := readObjects(ff, cmd.InOrStdin(), "diff")
			if err != nil {
				fail(err)
			}
			for _, err := range errs {
				fail(err)
			}
			differs := false
			if len(ms) > 0 {
				cl, err := o.client(cmd)
				if err != nil {
					return &exitCodeError{code: diffFailed, msg: FormatError(err)}
				}
				for i := range ms {
					d, err := diffManifest(cmd.Context(), cl, &ms[i], o.namespace, cmd.OutOrStdout(), cmd.ErrOrStderr())
					if err != nil {
						fail(fmt.Errorf("%s from %q: %w", ms[i].ref(), ms[i].source, err))
						continue
					}
					differs = differs || d
				}
			}
			switch {
			case len(problems) > 0:
				return &exitCodeError{code: diffFailed, msg: strings.Join(problems, "\n")}
			case differs:
				return errReported // exit 1 with nothing more to say
			}
			return nil
		},
	}
	addFileFlags(cmd, &ff, "the manifests to compare")
	return cmd
}

// diffManifest prints the diff of one manifest's object and reports
// whether there was one. MERGED is computed as applyManifest does, from
// what the server would store of the manifest: a manifest the server's
// strict decoder refuses (an unknown field) is refused with its error,
// its warnings go to warnw, and the fields it drops are left out.
func diffManifest(ctx context.Context, cl *client.Client, m *manifest, flagNS string, w, warnw io.Writer) (bool, error) {
	if m.name == "" {
		return false, fmt.Errorf("apply needs metadata.name (metadata.generateName is only for create)")
	}
	ns, err := namespaceFor(m, flagNS, cl.Namespace())
	if err != nil {
		return false, err
	}
	doc, err := json.Marshal(m.obj)
	if err != nil {
		return false, fmt.Errorf("encode %s: %w", m.ref(), err)
	}
	warnings, err := api.DecodeRequestInto(doc, m.r.New())
	if err != nil {
		return false, err
	}
	for _, text := range warnings {
		printWarning(warnw, text)
	}
	last, err := lastApplied(m.obj)
	if err != nil {
		return false, err
	}
	kept := deepCopy(m.obj).(map[string]any)
	api.DropUnstored(m.r, kept)
	var live, merged map[string]any
	data, _, err := cl.Do(ctx, http.MethodGet, client.PathFor(m.r, ns, m.name, ""), url.Values{"consistent": {"true"}}, nil)
	switch {
	case api.IsNotFound(err):
		merged = forCreate(kept, ns, last)
	case err != nil:
		return false, err
	default:
		if live, err = decodeJSONMap(data); err != nil {
			return false, err
		}
		merged = mergeApply(live, kept, last)
	}
	before, err := yamlOf(live)
	if err != nil {
		return false, err
	}
	after, err := yamlOf(merged)
	if err != nil {
		return false, err
	}
	if before == after {
		return false, nil
	}
	name := diffName(m.r, ns, m.name)
	fmt.Fprintf(w, "diff -u -N LIVE/%[1]s MERGED/%[1]s\n--- LIVE/%[1]s\n+++ MERGED/%[1]s\n", name)
	unifiedDiff(w, splitLines(before), splitLines(after), 3)
	return true, nil
}

// diffName names an object in the diff's headers as kubectl names its
// files: group.version.Kind[.namespace].name.
func diffName(r *api.Resource, ns, name string) string {
	parts := []string{strings.ReplaceAll(r.APIVersion(), "/", "."), r.Kind}
	if ns != "" {
		parts = append(parts, ns)
	}
	return strings.Join(append(parts, name), ".")
}

// yamlOf renders an object as YAML; nil (no object) is empty.
func yamlOf(obj map[string]any) (string, error) {
	if obj == nil {
		return "", nil
	}
	doc, err := json.Marshal(obj)
	if err != nil {
		return "", fmt.Errorf("encode object: %w", err)
	}
	var b bytes.Buffer
	if err := printRaw(&b, outputYAML, doc); err != nil {
		return "", err
	}
	return b.String(), nil
}

// splitLines splits s into lines that keep their newline; a last line
// without one stays without.
func splitLines(s string) []string {
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// editOp is one line of an edit script: kept (' '), removed ('-') or
// added ('+').
type editOp struct {
	kind byte
	line string
}

// maxDiffCells bounds the table of the longest common subsequence; past
// it the differing middle of two texts shows as removed, then added.
const maxDiffCells = 16 << 20

// editScript computes the shortest edit script from a to b by their
// longest common subsequence of lines, after setting aside the common
// head and tail.
func editScript(a, b []string) []editOp {
	head := 0
	for head < len(a) && head < len(b) && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	var ops []editOp
	for _, l := range a[:head] {
		ops = append(ops, editOp{' ', l})
	}
	ma, mb := a[head:len(a)-tail], b[head:len(b)-tail]
	n, m := len(ma), len(mb)
	if n*m > maxDiffCells {
		for _, l := range ma {
			ops = append(ops, editOp{'-', l})
		}
		for _, l := range mb {
			ops = append(ops, editOp{'+', l})
		}
	} else {
		// lcs[i][j]: the longest common subsequence of ma[i:] and mb[j:].
		lcs := make([][]int32, n+1)
		for i := range lcs {
			lcs[i] = make([]int32, m+1)
		}
		for i := n - 1; i >= 0; i-- {
			for j := m - 1; j >= 0; j-- {
				if ma[i] == mb[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < n || j < m {
			switch {
			case i < n && j < m && ma[i] == mb[j]:
				ops = append(ops, editOp{' ', ma[i]})
				i, j = i+1, j+1
			case j == m || (i < n && lcs[i+1][j] >= lcs[i][j+1]):
				// Removals before additions, as diff prints them.
				ops = append(ops, editOp{'-', ma[i]})
				i++
			default:
				ops = append(ops, editOp{'+', mb[j]})
				j++
			}
		}
	}
	for _, l := range a[len(a)-tail:] {
		ops = append(ops, editOp{' ', l})
	}
	return ops
}

// unifiedDiff writes the hunks of a unified diff of a and b with ctx
// lines of context, as `diff -u` does.
func unifiedDiff(w io.Writer, a, b []string, ctx int) {
	ops := editScript(a, b)
	for start := 0; start < len(ops); {
		// The next change.
		first := start
		for first < len(ops) && ops[first].kind == ' ' {
			first++
		}
		if first == len(ops) {
			return
		}
		// The hunk runs until ctx*2 unchanged lines in a row (or the end).
		end := first
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*ctx {
				end = min(end+ctx, len(ops))
				break
			}
			end = run
		}
		from := max(first-ctx, start)
		// Line numbers: count the lines of a and b before the hunk.
		aLine, bLine := 0, 0
		for _, op := range ops[:from] {
			if op.kind != '+' {
				aLine++
			}
			if op.kind != '-' {
				bLine++
			}
		}
		aCount, bCount := 0, 0
		for _, op := range ops[from:end] {
			if op.kind != '+' {
				aCount++
			}
			if op.kind != '-' {
				bCount++
			}
		}
		fmt.Fprintf(w, "@@ -%s +%s @@\n", hunkRange(aLine, aCount), hunkRange(bLine, bCount))
		for _, op := range ops[from:end] {
			line := op.line
			if !strings.HasSuffix(line, "\n") {
				line += "\n\\ No newline at end of file\n"
			}
			fmt.Fprintf(w, "%c%s", op.kind, line)
		}
		start = end
	}
}

// hunkRange is diff's "start,count": the first line (1-based; the line
// before when count is 0), the count left out when it is 1.
func hunkRange(before, count int) string {
	switch count {
	case 0:
		return fmt.Sprintf("%d,0", before)
	case 1:
		return fmt.Sprintf("%d", before+1)
	}
	return fmt.Sprintf("%d,%d", before+1, count)
}
