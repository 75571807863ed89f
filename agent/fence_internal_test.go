package agent

import (
	"path/filepath"
	"testing"
	"time"
)

// The fence clock across restarts (TNT-9): the same boot keeps the last
// acknowledgement, so a restarted agent counts the time it was down; a
// new boot knows nothing and fences at once until the control plane
// answers; a new agent with nothing saved starts from now.
func TestFenceClockAcrossRestarts(t *testing.T) {
	st, err := openState(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var boot time.Duration = 100 * time.Second
	now := func() time.Duration { return boot }

	fresh := loadFence(st, now, "boot-a", false)
	if got := fresh.deadline(6 * time.Second); got != 106*time.Second {
		t.Fatalf("new agent: deadline %v, want start + toleration (grace unknown: 0)", got)
	}
	rec, due := fresh.ack(110*time.Second, 4*time.Second, time.Second)
	if !due {
		t.Fatal("first ack not saved")
	}
	if err := st.setFence(rec); err != nil {
		t.Fatal(err)
	}
	if got := fresh.deadline(6 * time.Second); got != 120*time.Second {
		t.Fatalf("after an ack at 110 s with grace 4 s: deadline %v, want 120 s", got)
	}
	// An older ack does not move it back.
	fresh.ack(105*time.Second, 4*time.Second, time.Second)
	if got := fresh.deadline(0); got != 114*time.Second {
		t.Fatalf("an older ack moved the deadline to %v", got)
	}

	boot = 200 * time.Second
	same := loadFence(st, now, "boot-a", true)
	if got := same.deadline(6 * time.Second); got != 120*time.Second {
		t.Fatalf("restart in the same boot: deadline %v, want the saved ack's 120 s", got)
	}
	if same.ackedAfter(110*time.Second) || !same.graceKnown() {
		t.Fatal("restart: the saved ack counts as new, or the grace was lost")
	}

	boot = 5 * time.Second
	rebooted := loadFence(st, now, "boot-b", true)
	if got := rebooted.deadline(time.Hour); got != 0 {
		t.Fatalf("after a reboot: deadline %v, want 0 (unknown: fence until the control plane answers)", got)
	}
	rebooted.ack(6*time.Second, 0, time.Second)
	if got := rebooted.deadline(time.Second); got != 6*time.Second+4*time.Second+time.Second {
		t.Fatalf("after a reboot and an ack: deadline %v, want ack + saved grace + toleration", got)
	}
}
