package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outpost-edge/outpost/controlplane/cli"
)

// visibleCommands walks the whole command tree but cobra's own help and
// completion commands and hidden ones.
func visibleCommands(c *cobra.Command, each func(*cobra.Command)) {
	if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
		return
	}
	each(c)
	for _, sub := range c.Commands() {
		visibleCommands(sub, each)
	}
}

// TestEveryCommandHasExample: every command that runs and takes
// arguments or flags of its own shows how to call it. The exemptions are
// commands systemd runs, not people.
func TestEveryCommandHasExample(t *testing.T) {
	exempt := map[string]string{
		"outpost adm binary check":   "systemd's ExecStartPre",
		"outpost adm binary stopped": "systemd's ExecStopPost",
	}
	visibleCommands(newRootCommand(), func(c *cobra.Command) {
		if !c.Runnable() || c.Example != "" {
			return
		}
		if _, ok := exempt[c.CommandPath()]; ok {
			return
		}
		takesArgs := strings.Contains(strings.TrimSpace(c.Use), " ")
		if takesArgs || c.LocalNonPersistentFlags().HasAvailableFlags() {
			t.Errorf("%q (%q) has no Example", c.CommandPath(), c.Use)
		}
	})
}

// specID is an internal requirement number such as "SPEC ADM-3" or
// "TNT-8": the spec's, which users do not have.
var specID = regexp.MustCompile(`\bSPEC\b|\b(ADM|TNT|SCH|NET|UPD|MCO|MAP|CVO|OSU|RAFT)-[0-9]+\b`)

// TestHelpCitesNoSpecIDs: help texts (short, long, examples and flag
// usages) do not cite the spec's numbers; comments in the code do.
func TestHelpCitesNoSpecIDs(t *testing.T) {
	exempt := map[string]bool{}
	visibleCommands(newRootCommand(), func(c *cobra.Command) {
		texts := []string{c.Short, c.Long, c.Example}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) { texts = append(texts, f.Usage) })
		found := ""
		for _, s := range texts {
			if m := specID.FindString(s); m != "" {
				found = m
			}
		}
		switch {
		case found != "" && !exempt[c.CommandPath()]:
			t.Errorf("help of %q cites %q, an internal spec number", c.CommandPath(), found)
		case found == "" && exempt[c.CommandPath()]:
			t.Errorf("help of %q is clean now: remove it from the exemptions", c.CommandPath())
		}
	})
}

// TestManPagesOfWholeTreeAreASCII: the pages of every command, the
// server's and agent's too, hold only ASCII (a help text's "…" is
// written as a roff escape), and groff, when installed, reads the pages
// whose help has such characters without a warning.
func TestManPagesOfWholeTreeAreASCII(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SOURCE_DATE_EPOCH", "1767225600")
	root := newRootCommand()
	root.SetArgs([]string{"man", dir})
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	if code := cli.Execute(context.Background(), root); code != 0 {
		t.Fatalf("man: exit %d: %s", code, out.String())
	}
	pages, err := filepath.Glob(filepath.Join(dir, "*.1"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages: %v", err)
	}
	for _, p := range pages {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if j := strings.IndexFunc(line, func(r rune) bool { return r > 0x7e || r < 0x20 && r != '\t' }); j >= 0 {
				t.Errorf("%s:%d: a character that is not ASCII: %q", filepath.Base(p), i+1, line)
			}
		}
	}
	agent, err := os.ReadFile(filepath.Join(dir, "outpost-agent.1"))
	if err != nil || !strings.Contains(string(agent), `sha256:\[u2026]::`) {
		t.Errorf("outpost-agent.1 does not name the ellipsis of its example (%v)", err)
	}
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Log("groff is not installed: the pages are checked to be ASCII only")
		return
	}
	var stderr bytes.Buffer
	cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z", filepath.Join(dir, "outpost-agent.1"), filepath.Join(dir, "outpost-sim-agents.1"))
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Errorf("groff: %v\n%s", err, stderr.String())
	}
}
