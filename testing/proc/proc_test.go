package proc

import (
	"os/exec"
	"testing"
	"time"
)

// WaitOrKill lets a process that ends within the grace end by itself and
// kills one that does not.
func TestWaitOrKill(t *testing.T) {
	quick := exec.Command("true")
	if err := quick.Start(); err != nil {
		t.Fatal(err)
	}
	if WaitOrKill(quick, time.Minute) {
		t.Error("a process that ended at once was killed")
	}
	stuck := exec.Command("sleep", "60")
	if err := stuck.Start(); err != nil {
		t.Fatal(err)
	}
	if !WaitOrKill(stuck, 10*time.Millisecond) {
		t.Error("a process still running after the grace was not killed")
	}
	if stuck.ProcessState == nil || stuck.ProcessState.Success() {
		t.Errorf("the stuck process was not ended by a kill: %v", stuck.ProcessState)
	}
}
