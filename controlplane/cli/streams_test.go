package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/outpost-edge/outpost/agent/endpoint/wire"
	"github.com/outpost-edge/outpost/controlplane/api"
)

// streamAPI serves the stream routes (logs, exec, image import) the way
// the API server does and hands everything else to a fakeAPI.
type streamAPI struct {
	f   *fakeAPI
	srv *httptest.Server

	mu       sync.Mutex
	requests []string
	uploads  map[string][]byte // node → archive received
}

func newStreamAPI(t *testing.T) *streamAPI {
	s := &streamAPI{f: newFakeAPI(t), uploads: map[string][]byte{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *streamAPI) run(args ...string) result {
	s.f.t.Helper()
	return runCLI(s.f.t, s.f.t.Context(), "", append([]string{"--server", s.srv.URL, "--insecure"}, args...)...)
}

func (s *streamAPI) runStdin(stdin string, args ...string) result {
	s.f.t.Helper()
	return runCLI(s.f.t, s.f.t.Context(), stdin, append([]string{"--server", s.srv.URL, "--insecure"}, args...)...)
}

func (s *streamAPI) serve(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	q := r.URL.Query()
	record := func() {
		s.mu.Lock()
		s.requests = append(s.requests, r.Method+" "+p+"?"+r.URL.RawQuery)
		s.mu.Unlock()
	}
	switch {
	case strings.HasSuffix(p, "/log"):
		record()
		if q.Get("container") == "nope" {
			writeStatus(w, api.NewBadRequest("container nope is not valid for pod web"))
			return
		}
		io.WriteString(w, "hello from web\nsecond line\n")
	case strings.HasSuffix(p, "/exec"):
		record()
		_ = http.NewResponseController(w).EnableFullDuplex()
		w.WriteHeader(200)
		fw := wire.NewFrameWriter(w, w.(http.Flusher).Flush)
		cmd := q["command"]
		switch cmd[0] {
		case "cat":
			io.Copy(fw.Stream(wire.StreamStdout), r.Body)
			fw.WriteExit(wire.ExitStatus{})
		case "sh":
			fw.Stream(wire.StreamStdout).Write([]byte("out\n"))
			fw.Stream(wire.StreamStderr).Write([]byte("err\n"))
			fw.WriteExit(wire.ExitStatus{ExitCode: 3})
		default:
			fw.WriteExit(wire.ExitStatus{ExitCode: -1, Error: `exec: "` + cmd[0] + `": executable file not found in $PATH`})
		}
	case strings.HasSuffix(p, "/images"):
		record()
		node := strings.Split(p, "/")[5]
		data, _ := io.ReadAll(r.Body)
		if node == "broken" {
			writeStatus(w, api.NewServiceUnavailable("cannot reach the agent of node broken at 10.0.0.9:10250: connection refused"))
			return
		}
		s.mu.Lock()
		s.uploads[node] = data
		s.mu.Unlock()
		json.NewEncoder(w).Encode(wire.ImageList{Kind: wire.KindImageList, Images: []wire.Image{
			{Names: []string{"example.local/app:1", "example.local/app:latest"}, Digest: "sha256:aa"},
			{Digest: "sha256:bb"},
		}})
	default:
		s.f.serve(w, r)
	}
}

func (s *streamAPI) last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		return ""
	}
	return s.requests[len(s.requests)-1]
}

func TestLogsCommand(t *testing.T) {
	s := newStreamAPI(t)
	expect(t, "plain", s.run("logs", "web"), 0, "hello from web\nsecond line\n", "")
	if got := s.last(); got != "GET /api/v1/namespaces/default/pods/web/log?" {
		t.Errorf("sent %q", got)
	}
	expect(t, "flags", s.run("logs", "pod/web", "-c", "app", "-f", "--tail", "5", "--timestamps", "-n", "shop"), 0, "hello from web\nsecond line\n", "")
	if got := s.last(); got != "GET /api/v1/namespaces/shop/pods/web/log?container=app&follow=true&tailLines=5&timestamps=true" {
		t.Errorf("sent %q", got)
	}
	expect(t, "previous", s.run("logs", "web", "--previous"), 0, "hello from web\nsecond line\n", "")
	if got := s.last(); got != "GET /api/v1/namespaces/default/pods/web/log?previous=true" {
		t.Errorf("sent %q", got)
	}
	expect(t, "server error", s.run("logs", "web", "-c", "nope"), 1, "", "Error from server (BadRequest): container nope is not valid for pod web\n")
	expect(t, "tail 0", s.run("logs", "web", "--tail", "0"), 1, "", "error: --tail 0 is not supported: give 1 or more lines, or -1 for all\nSee 'outpost logs --help' for usage.\n")
	expect(t, "not a workload", s.run("logs", "service/web"), 1, "", "error: \"service/web\": a Service has no pods to choose from; give deployment/NAME, daemonset/NAME or replicaset/NAME\nSee 'outpost logs --help' for usage.\n")
	expect(t, "no such type", s.run("logs", "gadget/web"), 1, "", "error: \"gadget/web\": give a pod's name, pod/NAME, or a workload as deployment/NAME, daemonset/NAME or replicaset/NAME\nSee 'outpost logs --help' for usage.\n")
	expect(t, "no pod", s.run("logs"), 1, "", "error: expected one pod name, e.g. `outpost logs web-1`\nSee 'outpost logs --help' for usage.\n")
	expect(t, "follow previous", s.run("logs", "web", "-f", "-p"), 1, "", "error: --follow and --previous cannot be given together: a previous container has exited\nSee 'outpost logs --help' for usage.\n")
}

// logs and exec take a workload as kubectl does: deployment/NAME is one
// of its pods, a running and ready one before the others, never one
// being deleted, and the choice is said on stderr (issue 15 item 7: the
// README's commands work as shown).
func TestLogsAndExecOfWorkload(t *testing.T) {
	s := newStreamAPI(t)
	s.f.put(api.ResourceForKind("Service"), `{"metadata":{"name":"web","namespace":"default"},"spec":{"ports":[{"port":80}]}}`)
	s.f.put(api.ResourceForKind("Deployment"), `{"metadata":{"name":"web","namespace":"default"},"spec":{"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"x"}]}}}}`)
	s.f.put(api.ResourceForKind("Deployment"), `{"metadata":{"name":"idle","namespace":"default"},"spec":{"selector":{"matchLabels":{"app":"idle"}},"template":{"metadata":{"labels":{"app":"idle"}},"spec":{"containers":[{"name":"c","image":"x"}]}}}}`)
	podR := api.ResourceForKind("Pod")
	s.f.put(podR, `{"metadata":{"name":"web-a","namespace":"default","labels":{"app":"web"}},"spec":{"containers":[{"name":"c"}]},"status":{"phase":"Pending"}}`)
	s.f.put(podR, `{"metadata":{"name":"web-b","namespace":"default","labels":{"app":"web"}},"spec":{"containers":[{"name":"c"}]},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"False"}]}}`)
	s.f.put(podR, `{"metadata":{"name":"web-c","namespace":"default","labels":{"app":"web"}},"spec":{"containers":[{"name":"c"}]},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}`)
	s.f.put(podR, `{"metadata":{"name":"web-0","namespace":"default","labels":{"app":"web"},"deletionTimestamp":"2026-01-01T00:00:00Z"},"spec":{"containers":[{"name":"c"}]},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}`)
	s.f.put(podR, `{"metadata":{"name":"other","namespace":"default","labels":{"app":"other"}},"spec":{"containers":[{"name":"c"}]},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}`)

	expect(t, "logs deployment", s.run("logs", "deployment/web"), 0, "hello from web\nsecond line\n", "Found 3 pods, using pod/web-c\n")
	if got := s.last(); got != "GET /api/v1/namespaces/default/pods/web-c/log?" {
		t.Errorf("sent %q", got)
	}
	expect(t, "exec deploy", s.run("exec", "deploy/web", "--", "sh", "-c", "exit 3"), 3, "out\n", "Found 3 pods, using pod/web-c\nerr\ncommand terminated with exit code 3\n")
	if got := s.last(); got != "POST /api/v1/namespaces/default/pods/web-c/exec?command=sh&command=-c&command=exit+3" {
		t.Errorf("sent %q", got)
	}
	expect(t, "no pods", s.run("logs", "deployment/idle"), 1, "", "error: deployment idle has no pods\n")
	expect(t, "no workload", s.run("logs", "deployment/nope"), 1, "", "Error from server (NotFound): deployments.apps \"nope\" not found\n")
}

func TestExecCommand(t *testing.T) {
	s := newStreamAPI(t)
	expect(t, "exit code", s.run("exec", "web", "--", "sh", "-c", "exit 3"), 3, "out\n", "err\ncommand terminated with exit code 3\n")
	if got := s.last(); got != "POST /api/v1/namespaces/default/pods/web/exec?command=sh&command=-c&command=exit+3" {
		t.Errorf("sent %q", got)
	}
	expect(t, "stdin", s.runStdin("typed\ninput\n", "exec", "-i", "-c", "app", "web", "--", "cat"), 0, "typed\ninput\n", "")
	if got := s.last(); got != "POST /api/v1/namespaces/default/pods/web/exec?command=cat&container=app&stdin=true" {
		t.Errorf("sent %q", got)
	}
	expect(t, "without -i no stdin", s.runStdin("ignored", "exec", "web", "--", "cat"), 0, "", "")
	expect(t, "missing command", s.run("exec", "web", "--", "nonexistent"), 1, "", "error: cannot run the command: exec: \"nonexistent\": executable file not found in $PATH\n")
	expect(t, "no dash", s.run("exec", "web", "ls"), 1, "", "error: expected POD -- COMMAND [ARGS...], e.g. `outpost exec web-1 -- ls /`\nSee 'outpost exec --help' for usage.\n")
	expect(t, "no command", s.run("exec", "web", "--"), 1, "", "error: expected POD -- COMMAND [ARGS...], e.g. `outpost exec web-1 -- ls /`\nSee 'outpost exec --help' for usage.\n")
	expect(t, "-it from habit", s.run("exec", "-it", "web", "--", "sh"), 1, "", "error: outpost exec has no -t (no terminal is allocated): use -i alone, e.g. `outpost exec -i POD -- sh`\nSee 'outpost exec --help' for usage.\n")
}

func TestImageImportCommand(t *testing.T) {
	s := newStreamAPI(t)
	archive := filepath.Join(t.TempDir(), "app.tar")
	data := bytes.Repeat([]byte("layer-bytes "), 5000)
	if err := os.WriteFile(archive, data, 0o600); err != nil {
		t.Fatal(err)
	}
	loaded := "loaded example.local/app:1, example.local/app:latest, sha256:bb\n"
	// Not on a terminal, stderr has a line as the import starts and one
	// as it ends (the lines between are held back for an hour).
	slowPlainProgress(t)
	expect(t, "nodes", s.run("image", "import", archive, "--node", "edge-1,edge-2", "--node", "edge-1"), 0,
		"edge-1: "+loaded+"edge-2: "+loaded, "0/2 nodes done\n2/2 nodes done\n")
	for _, n := range []string{"edge-1", "edge-2"} {
		if !bytes.Equal(s.uploads[n], data) {
			t.Errorf("%s received %d bytes, want the archive's %d", n, len(s.uploads[n]), len(data))
		}
	}

	s.f.put(nodeR, `{"metadata":{"name":"n2"}}`)
	s.f.put(nodeR, `{"metadata":{"name":"n1"}}`)
	s.f.put(nodeR, `{"metadata":{"name":"broken"}}`)
	expect(t, "all, one failing", s.run("image", "import", archive, "--all"), 1,
		"n1: "+loaded+"n2: "+loaded,
		"0/3 nodes done\n3/3 nodes done\nbroken: Error from server (ServiceUnavailable): cannot reach the agent of node broken at 10.0.0.9:10250: connection refused\n")

	expect(t, "neither", s.run("image", "import", archive), 1, "", "error: give the nodes to load the archive onto with --node NODE, or --all for every node\nSee 'outpost image import --help' for usage.\n")
	expect(t, "both", s.run("image", "import", archive, "--all", "--node", "n1"), 1, "", "error: give the nodes to load the archive onto with --node NODE, or --all for every node\nSee 'outpost image import --help' for usage.\n")
	r := s.run("image", "import", filepath.Join(t.TempDir(), "missing.tar"), "--all")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "error: image archive: stat ") {
		t.Errorf("missing file: %+v", r)
	}

	// On a terminal, stderr shows each node's bytes sent of the total.
	onTerminal(t)
	r = s.run("image", "import", archive, "--node", "edge-1")
	if want := "\redge-1 0 B/58.6 KiB\x1b[K"; r.code != 0 || !strings.HasPrefix(r.stderr, want) {
		t.Errorf("progress: %+v, want stderr starting %q", r, want)
	}
	if want := "\redge-1 58.6 KiB/58.6 KiB\x1b[K\n"; r.code != 0 || !strings.HasSuffix(r.stderr, want) {
		t.Errorf("progress: %+v, want stderr ending %q", r, want)
	}
}

func TestByteSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 100 << 20: "100.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := byteSize(n); got != want {
			t.Errorf("byteSize(%d) = %q, want %q", n, got, want)
		}
	}
}
