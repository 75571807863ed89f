package fake

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outpost-edge/outpost/runtime"
	"github.com/outpost-edge/outpost/runtime/ociarchive"
	"github.com/outpost-edge/outpost/runtime/runtimetest"
)

func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestContract(t *testing.T) {
	runtimetest.Run(t, func(t *testing.T) (runtime.Runtime, runtimetest.Env) {
		rt := New()
		current := rt
		return rt, runtimetest.Env{
			Name:           "fake",
			ClosedRegistry: closedPort(t),
			CreateForeign:  func(t *testing.T, id string) { rt.AddForeign(id) },
			ForeignExists:  func(t *testing.T, id string) bool { return rt.ForeignExists(id) },
			Reopen: func(t *testing.T) runtime.Runtime {
				current = current.Reopen()
				if _, err := rt.Version(context.Background()); !errors.Is(err, runtime.ErrUnavailable) {
					t.Errorf("the closed client still answers: %v", err)
				}
				return current
			},
			Unreachable: func(t *testing.T) runtime.Runtime {
				down := New()
				down.SetDown(true)
				return down
			},
		}
	})
}

// withImage returns a fake holding the suite's image.
func withImage(t *testing.T) *Runtime {
	t.Helper()
	rt := New()
	if _, err := rt.ImportImages(context.Background(), bytes.NewReader(runtimetest.TestImage(t))); err != nil {
		t.Fatal(err)
	}
	return rt
}

func spec(id string, args ...string) runtime.ContainerSpec {
	return runtime.ContainerSpec{ID: id, Image: runtimetest.TestImageRef, Args: args, Labels: map[string]string{runtime.LabelPodUID: "u-" + id}}
}

func mustStart(t *testing.T, rt *Runtime, s runtime.ContainerSpec) {
	t.Helper()
	ctx := context.Background()
	if err := rt.CreateContainer(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
}

// In a synctest bubble the grace period passes in virtual time: a stop
// of a process that ignores SIGTERM takes exactly the grace.
func TestStopGraceVirtualTime(t *testing.T) {
	rt := withImage(t)
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mustStart(t, rt, spec("stubborn", "ignore-term"))
		mustStart(t, rt, spec("polite", "sleep"))
		t0 := time.Now()
		if err := rt.StopContainer(ctx, "stubborn", time.Hour); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(t0); d != time.Hour {
			t.Errorf("stubborn stop took %v of virtual time, want the 1h grace", d)
		}
		t0 = time.Now()
		if err := rt.StopContainer(ctx, "polite", time.Hour); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(t0); d != 0 {
			t.Errorf("polite stop took %v, want no wait", d)
		}
		st, _ := rt.ContainerStatus(ctx, "stubborn")
		if st.ExitCode != 137 || st.Reason != "Error" {
			t.Errorf("stubborn: %+v", st)
		}
		st, _ = rt.ContainerStatus(ctx, "polite")
		if st.ExitCode != 0 || st.Reason != "Completed" {
			t.Errorf("polite: %+v", st)
		}
		// ticks run on virtual time too: 10 ticks of a minute.
		mustStart(t, rt, spec("ticker", "ticks", "10", "60000"))
		var buf bytes.Buffer
		t0 = time.Now()
		if err := rt.Logs(ctx, "ticker", runtime.LogOptions{Follow: true, TailLines: 1}, &buf); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(t0); d != 10*time.Minute {
			t.Errorf("following 10 one-minute ticks took %v", d)
		}
		if got := buf.String(); got != "tick 1\ntick 2\ntick 3\ntick 4\ntick 5\ntick 6\ntick 7\ntick 8\ntick 9\ntick 10\n" {
			t.Errorf("followed %q", got)
		}
		for _, id := range []string{"stubborn", "polite", "ticker"} {
			if err := rt.RemoveContainer(ctx, id); err != nil {
				t.Error(err)
			}
		}
	})
}

func TestKnobs(t *testing.T) {
	ctx := context.Background()
	rt := withImage(t)

	mustStart(t, rt, spec("crash", "sleep"))
	if !rt.Crash("crash", 42) {
		t.Fatal("Crash of a running container reported false")
	}
	waitExited(t, rt, "crash")
	if st, _ := rt.ContainerStatus(ctx, "crash"); st.ExitCode != 42 || st.Reason != "Error" {
		t.Errorf("crashed: %+v", st)
	}
	if rt.Crash("crash", 1) {
		t.Error("Crash of an exited container reported true")
	}

	mustStart(t, rt, spec("oom", "sleep"))
	rt.OOMKill("oom")
	waitExited(t, rt, "oom")
	if st, _ := rt.ContainerStatus(ctx, "oom"); st.ExitCode != 137 || st.Reason != "OOMKilled" {
		t.Errorf("OOM killed: %+v", st)
	}

	rt.SetDown(true)
	if _, err := rt.ListContainers(ctx); !errors.Is(err, runtime.ErrUnavailable) {
		t.Errorf("down: %v", err)
	}
	rt.SetDown(false)
	if _, err := rt.ListContainers(ctx); err != nil {
		t.Errorf("up again: %v", err)
	}

	img := ociarchive.Image{Name: "x", Files: []ociarchive.File{{Path: "/bin/app", Mode: 0o755}}, Entrypoint: []string{"/bin/app"}}
	auth := &runtime.RegistryAuth{Host: "registry.example:5000", Username: "u", Password: "p"}
	if err := rt.AddRegistryImage("registry.example:5000/app:1", img, auth); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.EnsureImage(ctx, "registry.example:5000/app:1", runtime.PullIfNotPresent, nil); !errors.Is(err, runtime.ErrImagePull) {
		t.Errorf("pull without credentials: %v", err)
	}
	wrong := []runtime.RegistryAuth{{Host: auth.Host, Username: "u", Password: "wrong"}}
	if _, err := rt.EnsureImage(ctx, "registry.example:5000/app:1", runtime.PullIfNotPresent, wrong); !errors.Is(err, runtime.ErrImagePull) {
		t.Errorf("pull with a wrong password: %v", err)
	}
	rt.FailNextPull(errors.New("registry on fire"))
	if _, err := rt.EnsureImage(ctx, "registry.example:5000/app:1", runtime.PullIfNotPresent, []runtime.RegistryAuth{*auth}); !errors.Is(err, runtime.ErrImagePull) {
		t.Errorf("FailNextPull: %v", err)
	}
	got, err := rt.EnsureImage(ctx, "registry.example:5000/app:1", runtime.PullIfNotPresent, []runtime.RegistryAuth{*auth})
	if err != nil || got.Names[0] != "registry.example:5000/app:1" {
		t.Errorf("pull with credentials: %+v, %v", got, err)
	}
	if _, err := rt.EnsureImage(ctx, "registry.example:5000/app:1", runtime.PullNever, nil); err != nil {
		t.Errorf("pulled image under Never: %v", err)
	}
}

func waitExited(t *testing.T, rt *Runtime, id string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if st, err := rt.ContainerStatus(context.Background(), id); err == nil && st.State == runtime.StateExited {
			return
		}
		time.Sleep(5 * time.Millisecond) // poll interval of a wait with a deadline
	}
	t.Fatalf("%s did not exit", id)
}
