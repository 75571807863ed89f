package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// TestManPages writes the pages as `make man` does and checks that every
// command the help lists has one, with its sections, and that groff
// reads them all without a warning.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SOURCE_DATE_EPOCH", "1767225600") // 2026-01-01
	r := runCLI(t, t.Context(), "", "man", dir)
	if r.code != 0 {
		t.Fatalf("man: %+v", r)
	}

	// Every command reachable through the help has a page, and no page
	// is for anything else.
	root := newRootCommand(&options{now: time.Now})
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var want []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		want = append(want, strings.ReplaceAll(c.CommandPath(), " ", "-")+".1")
		for _, sub := range c.Commands() {
			if !sub.Hidden && sub.Name() != "help" {
				walk(sub)
			}
		}
	}
	walk(root)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("pages %q,\nwant %q", got, want)
	}
	for _, p := range []string{"outpost.1", "outpost-get.1", "outpost-adm-upgrade-nodes.1", "outpost-completion-bash.1"} {
		if !slices.Contains(got, p) {
			t.Errorf("no page %s", p)
		}
	}
	if r.stdout != "wrote "+strconv.Itoa(len(want))+" man pages to "+dir+"\n" {
		t.Errorf("stdout %q", r.stdout)
	}

	// Structure: every page has its sections in order, and no line
	// starts a request it did not mean (a dot or quote from the help).
	for _, name := range got {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		page := string(data)
		last := -1
		for _, sec := range []string{".TH ", ".SH NAME\n", ".SH SYNOPSIS\n", ".SH DESCRIPTION\n", ".SH \"SEE ALSO\"\n"} {
			i := strings.Index(page, sec)
			if i < last {
				t.Errorf("%s: section %q missing or out of order", name, sec)
			}
			last = i
		}
		for line := range strings.SplitSeq(page, "\n") {
			if !strings.HasPrefix(line, ".") {
				continue
			}
			req, _, _ := strings.Cut(line[1:], " ")
			if !slices.Contains([]string{`\"`, "TH", "nh", "ad", "SH", "PP", "TP", "nf", "fi", "RS", "RE"}, req) {
				t.Errorf("%s: unexpected request %q", name, line)
			}
		}
	}
	get, _ := os.ReadFile(filepath.Join(dir, "outpost-get.1"))
	for _, s := range []string{
		`.TH "OUTPOST\-GET" 1 "2026\-01\-01" "outpost dev" "outpost manual"`,
		"outpost\\-get \\- Display one or many objects\n",
		".SH OPTIONS\n",
		"\\fB\\-A\\fR, \\fB\\-\\-all\\-namespaces\\fR\n",
		"\\fB\\-l\\fR, \\fB\\-\\-selector\\fR=\\fIstring\\fR\n",
		".SH \"OPTIONS INHERITED FROM PARENT COMMANDS\"\n",
		"\\fB\\-n\\fR, \\fB\\-\\-namespace\\fR=\\fIstring\\fR\n",
		".SH EXAMPLES\n",
		"outpost get pods \\-A \\-o wide\n",
		"\\fBoutpost\\fR(1)\n",
	} {
		if !strings.Contains(string(get), s) {
			t.Errorf("outpost-get.1 lacks %q:\n%s", s, get)
		}
	}

	// groff is optional (not a part outpost drives): without it the
	// structure checked above is what is tested.
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Log("groff is not installed: the pages' structure is checked, their formatting is not")
		return
	}
	// All pages at once (one process): -ww turns every warning on, -z
	// formats without output.
	args := []string{"-man", "-Tutf8", "-ww", "-z"}
	for _, name := range got {
		args = append(args, filepath.Join(dir, name))
	}
	var stderr bytes.Buffer
	cmd := exec.Command(groff, args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Errorf("groff: %v\n%s", err, stderr.String())
	}
	out, err := exec.Command(groff, "-man", "-Tutf8", "-P", "-cbou", filepath.Join(dir, "outpost-get.1")).Output()
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, s := range []string{"NAME", "outpost-get - Display one or many objects", "SYNOPSIS", "outpost get TYPE[,TYPE...] [NAME...] | TYPE/NAME... [flags]",
		"-A, --all-namespaces", "outpost get deploy/web -o yaml", "SEE ALSO", "outpost(1)"} {
		if !strings.Contains(text, s) {
			t.Errorf("groff's rendering of outpost-get.1 lacks %q:\n%s", s, text)
		}
	}
}

// TestRoffEscaping checks that help text cannot issue roff requests or
// escapes of its own.
func TestRoffEscaping(t *testing.T) {
	var b bytes.Buffer
	roffText(&b, ".dangerous request\n'also a request\nback\\slash and -flag\n  .indented dot\n\nnext")
	want := `\&.dangerous request
\&'also a request
back\eslash and \-flag
.nf
  .indented dot
.fi
.PP
next
`
	if b.String() != want {
		t.Errorf("roffText:\n%s\nwant:\n%s", b.String(), want)
	}
	if got := roffQuote(`say "hi" -x`); got != `"say ""hi"" \-x"` {
		t.Errorf("roffQuote = %s", got)
	}
	// Beyond ASCII: named, not raw (groff warns about a raw "…").
	if got := roffLine("--token OP1::sha256:…::id ±10% \xff"); got != `\-\-token OP1::sha256:\[u2026]::id \[u00B1]10% ?` {
		t.Errorf("roffLine of non-ASCII = %s", got)
	}

	c := &cobra.Command{Use: "x", Short: `.TH evil \fB`, Long: ".SH evil\n\\fIx", Run: func(*cobra.Command, []string) {}}
	c.Flags().String("f", "", ".in 5 \\")
	page := string(manPage(c, time.Unix(0, 0)))
	for _, bad := range []string{"\n.SH evil", "\n.in 5", `\fIx`, `\fB` + "\n"} {
		if strings.Contains(page, bad) {
			t.Errorf("page holds %q unescaped:\n%s", bad, page)
		}
	}
}
