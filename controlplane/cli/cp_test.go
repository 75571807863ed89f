package cli

import (
	"archive/tar"
	"bytes"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/agent/endpoint/wire"
)

// withTarExec makes f answer exec requests by running the host's tar
// with the container's paths below root, as a container with tar would;
// in container "notar" there is no tar.
func withTarExec(t *testing.T, f *fakeAPI, root string) {
	f.route(func(p string) bool { return strings.HasSuffix(p, "/exec") }, func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		w.WriteHeader(200)
		fw := wire.NewFrameWriter(w, w.(http.Flusher).Flush)
		q := r.URL.Query()
		args := q["command"]
		if q.Get("container") == "notar" || len(args) < 5 || args[0] != "tar" || args[3] != "-C" {
			fw.WriteExit(wire.ExitStatus{ExitCode: -1, Error: `exec: "` + args[0] + `": executable file not found in $PATH`})
			return
		}
		args[4] = filepath.Join(root, args[4])
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdin = r.Body
		cmd.Stdout = fw.Stream(wire.StreamStdout)
		cmd.Stderr = fw.Stream(wire.StreamStderr)
		err := cmd.Run()
		code := 0
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Errorf("run tar: %v", err)
		}
		fw.WriteExit(wire.ExitStatus{ExitCode: code})
	})
}

func TestCp(t *testing.T) {
	if _, err := exec.LookPath("tar"); err != nil {
		t.Fatalf("the cp test runs the host's tar as the container's: %v", err)
	}
	f := newFakeAPI(t)
	root := t.TempDir() // the container's file system
	withTarExec(t, f, root)
	local := t.TempDir()
	writeFile(t, root, "var/log/app.log", "line 1\nline 2\n")
	writeFile(t, root, "etc/app/conf.d/a.conf", "a=1\n")
	writeFile(t, root, "etc/app/main.conf", "main\n")
	if err := os.Symlink("main.conf", filepath.Join(root, "etc/app/current")); err != nil {
		t.Fatal(err)
	}
	read := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	// From the container: a file, then a directory tree.
	expect(t, "file from pod", f.run("cp", "web:/var/log/app.log", filepath.Join(local, "app.log")), 0, "", "")
	if got := read(filepath.Join(local, "app.log")); got != "line 1\nline 2\n" {
		t.Errorf("copied file holds %q", got)
	}
	expect(t, "file into a directory", f.run("cp", "web:/var/log/app.log", local), 0, "", "")
	if got := read(filepath.Join(local, "app.log")); got != "line 1\nline 2\n" {
		t.Errorf("file copied into a directory holds %q", got)
	}
	expect(t, "tree from pod", f.run("cp", "shop/web:/etc/app", filepath.Join(local, "conf"), "-c", "app"), 0, "", "")
	if read(filepath.Join(local, "conf/conf.d/a.conf")) != "a=1\n" || read(filepath.Join(local, "conf/main.conf")) != "main\n" {
		t.Error("the directory tree was not copied whole")
	}
	if l, err := os.Readlink(filepath.Join(local, "conf/current")); err != nil || l != "main.conf" {
		t.Errorf("symlink copied as %q, %v", l, err)
	}
	if !f.sawRequest("POST /api/v1/namespaces/shop/pods/web/exec?command=tar&command=cf&command=-&command=-C&command=%2Fetc&command=app&container=app") {
		t.Errorf("cp from shop/web did not exec tar there: %v", f.requests)
	}

	// To the container: the copy becomes the destination path, in a
	// directory that must exist (tar -C).
	res := f.run("cp", filepath.Join(local, "conf"), "web:/srv/conf2")
	if res.code != 1 || !strings.Contains(res.stderr, "srv: Cannot open") {
		t.Errorf("cp into a missing directory: code %d, stderr %q", res.code, res.stderr)
	}
	if err := os.Mkdir(filepath.Join(root, "srv"), 0o755); err != nil {
		t.Fatal(err)
	}
	expect(t, "tree to pod", f.run("cp", filepath.Join(local, "conf"), "web:/srv/conf2"), 0, "", "")
	if read(filepath.Join(root, "srv/conf2/conf.d/a.conf")) != "a=1\n" || read(filepath.Join(root, "srv/conf2/main.conf")) != "main\n" {
		t.Error("the tree was not copied into the container")
	}
	expect(t, "file to pod", f.run("cp", filepath.Join(local, "app.log"), "web:/srv/copy.log"), 0, "", "")
	if read(filepath.Join(root, "srv/copy.log")) != "line 1\nline 2\n" {
		t.Error("the file was not copied into the container")
	}

	res = f.run("cp", "web:/var/log/nope", filepath.Join(local, "nope"))
	if res.code != 1 || !strings.HasPrefix(res.stderr, "error: tar in pod web exited with code 2: ") || !strings.Contains(res.stderr, "nope") {
		t.Errorf("missing remote file: code %d, stderr %q", res.code, res.stderr)
	}
	expect(t, "no tar", f.run("cp", "web:/var/log/app.log", filepath.Join(local, "x"), "-c", "notar"), 1, "",
		"error: cp needs tar in the container: cannot run the command: exec: \"tar\": executable file not found in $PATH\n")
	expect(t, "both local", f.run("cp", "a", "./b"), 1, "", "error: one of the source and the destination must be POD:PATH\nSee 'outpost cp --help' for usage.\n")
	expect(t, "both remote", f.run("cp", "a:/x", "b:/y"), 1, "",
		"error: one of the source and the destination must be local; copying between pods is not supported\nSee 'outpost cp --help' for usage.\n")
	expect(t, "root", f.run("cp", "web:/", local), 1, "", "error: cannot copy \"/\": name a file or a directory below /\nSee 'outpost cp --help' for usage.\n")
}

// An archive from a container cannot write outside the destination.
func TestCpRefusesEscapes(t *testing.T) {
	for what, hdr := range map[string]tar.Header{
		"parent":           {Name: "../evil", Typeflag: tar.TypeReg},
		"through parent":   {Name: "app/../../evil", Typeflag: tar.TypeReg},
		"absolute":         {Name: "/etc/evil", Typeflag: tar.TypeReg},
		"other root":       {Name: "other/x", Typeflag: tar.TypeReg},
		"prefix lookalike": {Name: "appx/evil", Typeflag: tar.TypeReg},
		"link out":         {Name: "app/l", Typeflag: tar.TypeSymlink, Linkname: "../../etc"},
		"absolute link":    {Name: "app/l", Typeflag: tar.TypeSymlink, Linkname: "/etc"},
	} {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		hdr.Mode = 0o644
		if err := tw.WriteHeader(&hdr); err != nil {
			t.Fatal(err)
		}
		tw.Close()
		dir := t.TempDir()
		dest := filepath.Join(dir, "dest")
		if err := untarTo(&b, "app", dest); !errors.Is(err, errUnsafeEntry) {
			t.Errorf("%s: %v, want %v", what, err, errUnsafeEntry)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%s: wrote %v", what, entries)
		}
	}
}

func TestParsePodPath(t *testing.T) {
	for in, want := range map[string]podPath{
		"web:/tmp/x":      {pod: "web", path: "/tmp/x"},
		"shop/web:/tmp/x": {namespace: "shop", pod: "web", path: "/tmp/x"},
		"/tmp/a:b":        {path: "/tmp/a:b"},
		"./a:b":           {path: "./a:b"},
		"plain":           {path: "plain"},
		":x":              {path: ":x"},
	} {
		if got := parsePodPath(in); got != want {
			t.Errorf("parsePodPath(%q) = %+v, want %+v", in, got, want)
		}
	}
}
