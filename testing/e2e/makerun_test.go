package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/testing/netns"
)

// Issue 15 item 7, the rough edges of a newcomer's first hour, on `make
// run`'s own script (packaging/run-dev.sh) with the real containerd and
// CNI plugins, in a network namespace of the test's so that the fixed
// ports and the pod network are its own:
//   - every command of the README's block after `make run` runs as
//     written and succeeds;
//   - Ctrl-C stops the demo's pods with the dev cluster (--stop-pods);
//   - a second run keeps the user's scale instead of applying the demo
//     again;
//   - a second `outpost dev` on taken ports stops at once naming the
//     flags and the process that holds them.
func TestMakeRunReadme(t *testing.T) {
	requireReal(t)
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	_, archive := buildDemo(t)
	h := netns.New(t, 57)
	root := t.TempDir()
	home := filepath.Join(root, "home")
	data := filepath.Join(root, "data")
	nsDir := filepath.Join(root, "netns")
	top := repoRoot(t)
	lines := readmeRunBlock(t, top)

	dev := &agentNode{t: t, name: "make-run", host: h, dir: filepath.Join(data, "agent")}
	dev.shareMounts(nsDir)
	t.Cleanup(dev.cleanup)
	env := []string{"HOME=" + home, "BIN=" + outpostBin, "DATA=" + data, "IMAGE=" + archive,
		"DEV_FLAGS=--cni-conf-dir " + filepath.Join(root, "net.d") + " --cni-netns-dir " + nsDir}
	start := func(logName string) (*exec.Cmd, <-chan struct{}, string) {
		t.Helper()
		logPath := filepath.Join(root, logName)
		logf, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { logf.Close() })
		cmd := exec.Command("nsenter", "--net=/run/netns/"+h.Name, "--",
			"unshare", "--mount", "--propagation", "unchanged", "--",
			"sh", "-c", enterHost, "sh", "bash", "packaging/run-dev.sh")
		cmd.Dir = top
		cmd.Env = append(os.Environ(), append(env, "SYSFS="+filepath.Join(root, logName+"-sysfs"))...)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			if t.Failed() {
				dumpTail(t, logName, logPath, 80)
			}
		})
		waitFor(t, 3*time.Minute, "make run's script saying the cluster runs", func() (bool, string) {
			b, _ := os.ReadFile(logPath)
			select {
			case <-done:
				t.Fatalf("run-dev.sh ended:\n%s", b)
			default:
			}
			return strings.Contains(string(b), "outpost dev is running"), lastLines(string(b), 5)
		})
		return cmd, done, logPath
	}
	// sh runs a shell line as the README's reader does: in the host's
	// network, from the repository's top, with bin/outpost the binary
	// under test.
	sh := func(line string) (string, error) {
		line = strings.ReplaceAll(line, "bin/outpost", outpostBin)
		cmd := exec.CommandContext(ctx, "nsenter", "--net=/run/netns/"+h.Name, "--", "bash", "-c", line)
		cmd.Dir = top
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	run1, run1Done, _ := start("run1.log")
	waitFor(t, 2*time.Minute, "the demo's pods running", func() (bool, string) {
		out, err := sh("bin/outpost get pods")
		if err != nil {
			return false, out
		}
		running := strings.Count(out, "Running")
		return running >= 4 && running == strings.Count(out, "\n")-1, out
	})
	for _, line := range lines {
		var out string
		// A line may need the demo a little longer (the caller's first
		// fetch, the hostPort's rules): each gets a short while.
		waitFor(t, 30*time.Second, "README line "+line, func() (bool, string) {
			var err error
			out, err = sh(line)
			return err == nil, fmt.Sprintf("%v: %s", err, out)
		})
		switch {
		case strings.HasPrefix(line, "curl"):
			if !strings.Contains(out, "hello from") {
				t.Errorf("%s: %q, want the demo's hello", line, out)
			}
		case strings.Contains(line, "exec daemonset/hello-node"):
			if !strings.Contains(out, "hello") {
				t.Errorf("%s: %q", line, out)
			}
		}
	}
	waitFor(t, 30*time.Second, "the caller reaching the Service hello by its name", func() (bool, string) {
		out, _ := sh("bin/outpost logs deployment/caller")
		return strings.Contains(out, "hello from"), out
	})

	// Ctrl-C: the script ends, and the dev cluster stops the pods with
	// it: no process names the agent's containerd any more (each shim
	// does, while its container runs).
	if err := run1.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-run1Done:
	case <-time.After(time.Minute):
		t.Fatal("run-dev.sh did not end within a minute of Ctrl-C")
	}
	if code := run1.ProcessState.ExitCode(); code != 0 {
		t.Errorf("Ctrl-C ended make run with status %d, want 0", code)
	}
	sock := filepath.Join(data, "agent", "containerd", "containerd.sock")
	waitFor(t, 30*time.Second, "no shim left of the demo's containers", func() (bool, string) {
		pids := pidsNaming(sock)
		return len(pids) == 0, fmt.Sprint(pids)
	})

	// Again: the scale of the README's block stays.
	_, _, log2 := start("run2.log")
	out, err := sh("bin/outpost get deployment ticker -o json")
	if err != nil {
		t.Fatalf("get deployment: %v: %s", err, out)
	}
	var d struct {
		Spec struct{ Replicas int } `json:"spec"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if d.Spec.Replicas != 4 {
		t.Errorf("after a second make run the ticker has %d replicas, want the 4 the README's scale set", d.Spec.Replicas)
	}
	if b, _ := os.ReadFile(log2); !strings.Contains(string(b), "not applied again") {
		t.Errorf("the second run does not say it left the demo alone:\n%s", lastLines(string(b), 20))
	}

	// A second dev cluster on the same ports stops at once, naming them.
	started := time.Now()
	out, err = sh("bin/outpost dev --data-dir " + filepath.Join(root, "second"))
	if err == nil {
		t.Fatalf("a second outpost dev on taken ports started:\n%s", out)
	}
	if took := time.Since(started); took > 10*time.Second {
		t.Errorf("the second outpost dev took %s to refuse", took)
	}
	for _, want := range []string{"127.0.0.1:6443 (--api-addr, the API) is in use by pid", "127.0.0.1:10250 (--agent-listen, the agent's endpoint) is in use by pid", "(outpost)"} {
		if !strings.Contains(out, want) {
			t.Errorf("second outpost dev said:\n%s\nwant %q", out, want)
		}
	}
	if _, err := net.Dial("tcp", h.Addr+":6443"); err == nil {
		t.Error("the dev API listens beyond loopback")
	}
}

// readmeRunBlock is the README's shell block that follows "`make run`
// keeps running", one command a line, comments dropped.
func readmeRunBlock(t *testing.T, top string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(top, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	state := 0 // 0: before the paragraph, 1: before the block, 2: in it
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case state == 0 && strings.HasPrefix(l, "`make run` keeps running"):
			state = 1
		case state == 1 && strings.HasPrefix(l, "```"):
			state = 2
		case state == 2 && strings.HasPrefix(l, "```"):
			if len(lines) < 5 {
				t.Fatalf("the README's block after make run has %d commands", len(lines))
			}
			return lines
		case state == 2:
			if i := strings.Index(l, "  #"); i >= 0 {
				l = l[:i]
			}
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
	}
	t.Fatal("the README has no shell block after \"`make run` keeps running\"")
	return nil
}
