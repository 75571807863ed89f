package containerd

import (
	"errors"
	"testing"
)

// A process that cannot be executed is a start error in runc's words and
// in crun's; the runtime's other failures are not.
func TestIsExecError(t *testing.T) {
	for msg, want := range map[string]bool{
		`failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "/no/such/command": stat /no/such/command: no such file or directory: unknown`: true,
		`OCI runtime create failed: runc create failed: unable to start container process: exec: "sh": executable file not found in $PATH: unknown`:                                                         true,
		`OCI runtime create failed: runc create failed: unable to start container process: exec /bin/x: exec format error: unknown`:                                                                         true,
		"failed to create shim task: OCI runtime create failed: executable file `/no/such/command` not found in $PATH: No such file or directory":                                                           true,
		"OCI runtime create failed: exec container process `/bin/x`: Exec format error":                                                                                                                     true,
		"OCI runtime create failed: exec container process (missing dynamic library?) `/app`: No such file or directory":                                                                                    true,
		"OCI runtime create failed: cgroups in hybrid mode not supported, drop all controllers from cgroupv2":                                                                                               false,
		"OCI runtime create failed: runc create failed: unable to apply cgroup configuration: cannot set memory limit: permission denied":                                                                   false,
	} {
		if got := isExecError(errors.New(msg)); got != want {
			t.Errorf("isExecError(%q) = %v, want %v", msg, got, want)
		}
	}
}
