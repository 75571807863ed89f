package proc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// A child that names a directory is found with its parent and command
// line, and KillNaming ends it and only it.
func TestProcessesAndKillNaming(t *testing.T) {
	dir := t.TempDir()
	mark := filepath.Join(dir, "marker")
	if err := os.WriteFile(mark, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("tail", "-f", mark)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	// Until the child has exec'd tail it is a copy of this test binary.
	var found *Process
	for deadline := time.Now().Add(5 * time.Second); found == nil && time.Now().Before(deadline); {
		for _, p := range Processes() {
			if p.PID == cmd.Process.Pid && p.Comm == "tail" {
				found = &p
			}
		}
		if found == nil {
			time.Sleep(10 * time.Millisecond) // polling /proc, with a deadline
		}
	}
	if found == nil {
		t.Fatalf("child %d not listed as tail", cmd.Process.Pid)
	}
	if found.PPID != os.Getpid() || found.Comm != "tail" || !found.Names(dir) || found.Names(dir+"-other") {
		t.Fatalf("child listed as %+v (PPID want %d, comm tail, naming %s)", *found, os.Getpid(), dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := KillNaming(ctx, dir)
	if err != nil || n != 1 {
		t.Fatalf("KillNaming = %d, %v; want 1 process killed", n, err)
	}
	select {
	case err := <-waited:
		if err == nil {
			t.Fatal("child exited cleanly; want killed")
		}
	case <-ctx.Done():
		t.Fatal("child still running after KillNaming")
	}
}

func TestPSS(t *testing.T) {
	pss, err := PSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	rss, err := RSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if pss <= 0 || pss > rss {
		t.Fatalf("PSS %d, RSS %d: want 0 < PSS <= RSS", pss, rss)
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/a/b`:          "/a/b",
		`/a\040b`:       "/a b",
		`/x\011y\134z`:  "/x\ty\\z",
		`/trailing\04`:  `/trailing\04`,
		`/not\0octal9x`: `/not\0octal9x`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// Mem's parts add up to the RSS, and this process has a heap and a
// mapped executable.
func TestMem(t *testing.T) {
	m, err := Mem(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.Anon <= 0 || m.File <= 0 || m.Anon+m.File+m.Shmem != m.RSS {
		t.Fatalf("Mem = %+v: want anon and file > 0, adding up with shmem to RSS", m)
	}
	if _, err := Mem(-1); err == nil {
		t.Fatal("Mem(-1) succeeded")
	}
}
