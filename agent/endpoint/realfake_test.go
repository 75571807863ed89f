package endpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/agent/endpoint/wire"
	"github.com/outpost-edge/outpost/runtime"
	"github.com/outpost-edge/outpost/runtime/fake"
	"github.com/outpost-edge/outpost/runtime/ociarchive"
)

// The endpoint against runtime/fake, the shared fake that passes the
// runtime contract suite: a real OCI archive imported through /images,
// containers created and started as the agent does, their logs and execs.
func TestWithContractFake(t *testing.T) {
	rt := fake.New()
	t.Cleanup(func() { rt.Close() })
	a := startAgentWith(t, rt)
	hc := a.serverClient(true)

	var archive bytes.Buffer
	if err := ociarchive.Build(&archive, ociarchive.Image{
		Name:       "outpost.local/app:1",
		Files:      []ociarchive.File{{Path: "/bin/app", Mode: 0o755, Data: []byte("#!fake")}},
		Entrypoint: []string{"/bin/app"},
	}); err != nil {
		t.Fatal(err)
	}
	code, body := do(t, hc, "POST", a.url+"/images", &archive)
	var list wire.ImageList
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil || len(list.Images) != 1 || !strings.Contains(strings.Join(list.Images[0].Names, " "), "outpost.local/app:1") {
		t.Fatalf("import: %d %s", code, body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := func(attempt string, args ...string) string {
		id := "uid1-app-" + attempt
		spec := runtime.ContainerSpec{ID: id, Image: "outpost.local/app:1", Args: args, Labels: map[string]string{
			runtime.LabelPodUID: "uid1", runtime.LabelPodNamespace: "default", runtime.LabelPodName: "web",
			runtime.LabelContainer: "app", runtime.LabelAttempt: attempt,
		}}
		if err := rt.CreateContainer(ctx, spec); err != nil {
			t.Fatal(err)
		}
		if err := rt.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	first := start("0", "exit", "3")
	waitUntil(t, "the first attempt to exit", func() bool {
		st, err := rt.ContainerStatus(ctx, first)
		return err == nil && st.State == runtime.StateExited
	})
	start("1", "sleep")
	waitUntil(t, "the second attempt to log", func() bool {
		code, body := do(t, hc, "GET", a.url+"/containerLogs/default/web/app", nil)
		return code == 200 && body == "sleeping\n"
	})
	if code, body := do(t, hc, "GET", a.url+"/containerLogs/default/web/app?previous=true", nil); code != 200 || body != "exiting 3\n" {
		t.Fatalf("previous: %d %q", code, body)
	}

	exec := func(query, stdin string) (wire.ExitStatus, string, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "POST", a.url+"/exec/default/web/app?"+query, strings.NewReader(stdin))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out, errb bytes.Buffer
		st, err := wire.ReadFrames(resp.Body, &out, &errb)
		if err != nil {
			t.Fatalf("exec %s: %v", query, err)
		}
		return st, out.String(), errb.String()
	}
	if st, out, _ := exec("command=/bin/app&command=echo&command=hello", ""); st.ExitCode != 0 || out != "hello\n" {
		t.Errorf("echo: %+v %q", st, out)
	}
	if st, out, _ := exec("command=/bin/app&command=cat&stdin=true", "piped in\n"); st.ExitCode != 0 || out != "piped in\nEOF\n" {
		t.Errorf("cat: %+v %q", st, out)
	}
	if st, _, errb := exec("command=/bin/app&command=stderr&command=oops", ""); st.ExitCode != 0 || errb != "oops\n" {
		t.Errorf("stderr: %+v %q", st, errb)
	}
	if st, _, _ := exec("command=/bin/app&command=exit&command=7", ""); st.ExitCode != 7 {
		t.Errorf("exit 7: %+v", st)
	}
	if st, _, _ := exec("command=/no/such/binary", ""); st.Error == "" {
		t.Errorf("a missing binary: %+v, want an error", st)
	}
}

// waitUntil polls cond until it holds or 10 s pass.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
