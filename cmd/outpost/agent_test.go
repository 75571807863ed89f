package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/outpost-edge/outpost/agent"
)

// --oci-runtime defaults to auto (crun where it runs, else runc), and the config file's ociRuntime is
// taken unless the flag is given (flags win, as for every setting).
func TestAgentOCIRuntimeSetting(t *testing.T) {
	if d := newAgentCommand().Flags().Lookup("oci-runtime").DefValue; d != "auto" {
		t.Errorf("--oci-runtime defaults to %q, want auto", d)
	}
	file := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(file, []byte("ociRuntime: crun\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "crun"},
		{[]string{"--oci-runtime", "/opt/bin/youki"}, "/opt/bin/youki"},
	} {
		cmd := newAgentCommand()
		if err := cmd.ParseFlags(tc.args); err != nil {
			t.Fatal(err)
		}
		cfg := agent.Config{OCIRuntime: cmd.Flags().Lookup("oci-runtime").Value.String()}
		if err := loadAgentFile(file, &cfg, cmd); err != nil {
			t.Fatal(err)
		}
		if cfg.OCIRuntime != tc.want {
			t.Errorf("flags %q with the file's ociRuntime: crun: OCIRuntime %q, want %q", tc.args, cfg.OCIRuntime, tc.want)
		}
	}
}
