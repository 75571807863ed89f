package containerd

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/runtime"
	"github.com/outpost-edge/outpost/runtime/runtimetest"
)

// WatchExits reports a container whose main process ends, and not the end
// of a process exec'd into a running one.
func TestWatchExits(t *testing.T) {
	rt, _ := realRuntime(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	importTestImage(ctx, t, rt)
	exits, err := rt.WatchExits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// runc's state is shared by every containerd of the host: IDs must not
	// repeat across runs.
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	sleeper, quitter := "sleeper-"+suffix, "quitter-"+suffix
	// Removed before containerd stops (at the test's end, after this):
	// left behind, runc's state would outlive the test.
	var made []string
	defer func() {
		for _, id := range made {
			_ = rt.StopContainer(context.Background(), id, 0)
			_ = rt.RemoveContainer(context.Background(), id)
		}
	}()
	run := func(id string, args ...string) {
		t.Helper()
		spec := runtime.ContainerSpec{ID: id, Image: runtimetest.TestImageRef, Args: args, Labels: map[string]string{runtime.LabelPodUID: "u-" + id}}
		if err := rt.CreateContainer(ctx, spec); err != nil {
			t.Fatal(err)
		}
		made = append(made, id)
		if err := rt.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	run(sleeper, "sleep")
	if code, err := rt.Exec(ctx, sleeper, runtime.ExecOptions{Command: []string{runtimetest.TestBinPath, "exit", "0"}}); err != nil || code != 0 {
		t.Fatalf("exec: %d %v", code, err)
	}
	run(quitter, "exit", "3")
	select {
	case id := <-exits:
		if id != quitter {
			t.Fatalf("first exit reported %q, want quitter (an exec's end is not the container's)", id)
		}
	case <-ctx.Done():
		t.Fatal("no exit reported for quitter")
	}
	if err := rt.StopContainer(ctx, sleeper, time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-exits:
		if id != sleeper {
			t.Fatalf("exit reported %q, want sleeper", id)
		}
	case <-ctx.Done():
		t.Fatal("no exit reported for sleeper")
	}
}
