package containerd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/runtime"
	"github.com/outpost-edge/outpost/runtime/containerd/logwriter"
)

// writeLog runs the log writer's copy over stdout and stderr contents
// into a file, one stream after the other.
func writeLog(t *testing.T, stdout, stderr string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := logwriter.NewWriter(f)
	w.Copy("stdout", strings.NewReader(stdout))
	w.Copy("stderr", strings.NewReader(stderr))
	return path
}

func readLog(t *testing.T, path string, opts runtime.LogOptions) string {
	t.Helper()
	var buf bytes.Buffer
	if err := followFile(context.Background(), path, opts, &buf, func() bool { return true }); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// Output comes back byte for byte, including a line longer than one
// entry and a last line without a newline.
func TestLogRoundTrip(t *testing.T) {
	long := strings.Repeat("x", 3*logwriter.MaxLine+5)
	out := "first\n" + long + "\nlast without newline"
	path := writeLog(t, out, "err line\n")
	if got := readLog(t, path, runtime.LogOptions{}); got != out+"err line\n" {
		t.Errorf("round trip lost bytes: got %d bytes, want %d", len(got), len(out)+len("err line\n"))
	}
	raw, _ := os.ReadFile(path)
	if n := strings.Count(string(raw), " stdout P "); n != 4 {
		t.Errorf("%d partial entries, want 3 for the long line and 1 for the unterminated one", n)
	}
	if !strings.Contains(string(raw), " stderr F err line\n") {
		t.Errorf("stderr entry missing:\n%.200s", raw)
	}
}

func TestLogTailAndTimestamps(t *testing.T) {
	long := strings.Repeat("y", logwriter.MaxLine+1)
	path := writeLog(t, "a\n"+long+"\nb\n", "")
	if got := readLog(t, path, runtime.LogOptions{TailLines: 2}); got != long+"\nb\n" {
		t.Errorf("tail 2 = %.40q..., want the long line and b", got)
	}
	if got := readLog(t, path, runtime.LogOptions{TailLines: 1}); got != "b\n" {
		t.Errorf("tail 1 = %q", got)
	}
	got := readLog(t, path, runtime.LogOptions{Timestamps: true})
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines with timestamps, want 3 (a long line gets one stamp)", len(lines))
	}
	for _, l := range lines {
		stamp, _, _ := strings.Cut(l, " ")
		if _, err := time.Parse(time.RFC3339Nano, stamp); err != nil {
			t.Errorf("line %.40q: %v", l, err)
		}
	}
}

// A torn entry at the end of the file (the writer mid-write) is not
// shown until it is complete.
func TestLogTornEntry(t *testing.T) {
	path := writeLog(t, "whole\n", "")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("2026-01-01T00:00:00Z stdout F tor")
	f.Close()
	if got := readLog(t, path, runtime.LogOptions{}); got != "whole\n" {
		t.Errorf("got %q, want only the whole entry", got)
	}
}
