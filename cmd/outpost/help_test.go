package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
	// taint's long text lives in a file being changed on another branch;
	// the exemption must go once that text is clean (the test says so).
	exempt := map[string]bool{"outpost taint": true, "outpost adm taint": true}
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
