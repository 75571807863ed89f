package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/agent/endpoint/wire"
	"github.com/outpost-edge/outpost/controlplane/api"
)

// streamServer imitates the API server's stream routes closely enough to
// check what the client sends and how it reads the replies.
func streamServer(t *testing.T) (*Client, *[]string) {
	t.Helper()
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery+" len="+strconv.FormatInt(r.ContentLength, 10)+" ct="+r.Header.Get("Content-Type"))
		q := r.URL.Query()
		switch {
		case strings.HasSuffix(r.URL.Path, "/log"):
			if q.Get("container") == "nope" {
				w.WriteHeader(400)
				json.NewEncoder(w).Encode(api.NewBadRequest("container nope is not valid for pod web").Status)
				return
			}
			w.WriteHeader(200)
			io.WriteString(w, "line 1\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case strings.HasSuffix(r.URL.Path, "/exec"):
			_ = http.NewResponseController(w).EnableFullDuplex()
			w.WriteHeader(200)
			fw := wire.NewFrameWriter(w, w.(http.Flusher).Flush)
			switch q["command"][0] {
			case "cat":
				io.Copy(fw.Stream(wire.StreamStdout), r.Body)
				fw.WriteExit(wire.ExitStatus{ExitCode: 0})
			case "fail":
				fw.Stream(wire.StreamStderr).Write([]byte("bad\n"))
				fw.WriteExit(wire.ExitStatus{ExitCode: 5})
			case "missing":
				fw.WriteExit(wire.ExitStatus{ExitCode: -1, Error: `exec: "missing": executable file not found in $PATH`})
			case "cut":
				fw.Stream(wire.StreamStdout).Write([]byte("half"))
			}
		case strings.HasSuffix(r.URL.Path, "/images"):
			n, _ := io.Copy(io.Discard, r.Body)
			if strings.Contains(r.URL.Path, "/edge-2/") {
				w.WriteHeader(403)
				json.NewEncoder(w).Encode(api.NewForbidden(`nodes "edge-2" is forbidden`).Status)
				return
			}
			json.NewEncoder(w).Encode(wire.ImageList{Kind: wire.KindImageList, Images: []wire.Image{{Names: []string{"x:1"}, Size: n}}})
		}
	}))
	t.Cleanup(srv.Close)
	c, err := New(Config{Server: srv.URL, Insecure: true, Token: "tok", Timeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c, &seen
}

func TestPodLogs(t *testing.T) {
	c, seen := streamServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The client's 1 ms request timeout does not cut a follow short.
	rc, err := c.PodLogs(ctx, "team", "web", PodLogOptions{Container: "app", Follow: true, TailLines: 3, Timestamps: true, Previous: true})
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(rc).ReadString('\n')
	if err != nil || line != "line 1\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	cancel()
	rc.Close()
	if want := "GET /api/v1/namespaces/team/pods/web/log?container=app&follow=true&previous=true&tailLines=3&timestamps=true len=0 ct="; (*seen)[0] != want {
		t.Fatalf("sent %q, want %q", (*seen)[0], want)
	}
	_, err = c.PodLogs(context.Background(), "team", "web", PodLogOptions{Container: "nope"})
	if se, ok := errors.AsType[*api.StatusError](err); !ok || se.Code() != 400 || se.Error() != "container nope is not valid for pod web" {
		t.Fatalf("bad container: %v", err)
	}
}

func TestExec(t *testing.T) {
	c, seen := streamServer(t)
	ctx := context.Background()
	var out, errb bytes.Buffer
	code, err := c.Exec(ctx, "default", "web", ExecOptions{Command: []string{"cat", "-"}, Stdin: strings.NewReader("hello"), Stdout: &out, Stderr: &errb})
	if err != nil || code != 0 || out.String() != "hello" {
		t.Fatalf("cat: %d %v %q", code, err, out.String())
	}
	if want := "POST /api/v1/namespaces/default/pods/web/exec?command=cat&command=-&stdin=true len=-1 ct=application/octet-stream"; (*seen)[0] != want {
		t.Fatalf("sent %q, want %q", (*seen)[0], want)
	}
	code, err = c.Exec(ctx, "default", "web", ExecOptions{Container: "side", Command: []string{"fail"}, Stdout: &out, Stderr: &errb})
	if err != nil || code != 5 || errb.String() != "bad\n" {
		t.Fatalf("fail: %d %v %q", code, err, errb.String())
	}
	if want := "POST /api/v1/namespaces/default/pods/web/exec?command=fail&container=side len=0 ct="; (*seen)[1] != want {
		t.Fatalf("sent %q, want %q", (*seen)[1], want)
	}
	_, err = c.Exec(ctx, "default", "web", ExecOptions{Command: []string{"missing"}})
	if ee, ok := errors.AsType[*ExecError](err); !ok || ee.Error() != `cannot run the command: exec: "missing": executable file not found in $PATH` {
		t.Fatalf("missing: %v", err)
	}
	_, err = c.Exec(ctx, "default", "web", ExecOptions{Command: []string{"cut"}, Stdout: io.Discard})
	if !errors.Is(err, wire.ErrNoExitStatus) {
		t.Fatalf("cut: %v", err)
	}
}

func TestImportImages(t *testing.T) {
	c, seen := streamServer(t)
	imgs, err := c.ImportImages(context.Background(), "edge-1", strings.NewReader("12345"), 5)
	if err != nil || len(imgs) != 1 || imgs[0].Names[0] != "x:1" || imgs[0].Size != 5 {
		t.Fatalf("import: %+v %v", imgs, err)
	}
	if want := "POST /apis/outpost.io/v1/nodes/edge-1/images? len=5 ct=application/x-tar"; (*seen)[0] != want {
		t.Fatalf("sent %q, want %q", (*seen)[0], want)
	}
	_, err = c.ImportImages(context.Background(), "edge-2", strings.NewReader("12345"), -1)
	if se, ok := errors.AsType[*api.StatusError](err); !ok || se.Code() != 403 {
		t.Fatalf("forbidden: %v", err)
	}
}
