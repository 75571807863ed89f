package cli

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/outpost-edge/outpost/testing/syncbuf"
)

// onTerminal makes the commands of the test print progress as on a
// terminal (of unknown width) into their stderr buffer.
func onTerminal(t *testing.T) {
	old := newProgressOn
	newProgressOn = func(w io.Writer) *Progress { return newProgress(w, true, 0) }
	t.Cleanup(func() { newProgressOn = old })
}

// slowPlainProgress holds back plain progress lines for an hour, so that
// a command's stderr has only its first and last status whatever the
// machine's speed.
func slowPlainProgress(t *testing.T) {
	old := plainInterval
	plainInterval = time.Hour
	t.Cleanup(func() { plainInterval = old })
}

// TestProgressPlainLines: not on a terminal, a status is a line; new
// statuses within plainInterval of the last line are held back, the
// newest of them printed when the interval is over; Done prints one still
// held back; nothing is printed twice or after Done.
func TestProgressPlainLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b syncbuf.Buffer
		p := newProgress(&b, false, 80)
		step := func(d time.Duration, want string) {
			t.Helper()
			time.Sleep(d)
			synctest.Wait()
			if got := b.String(); got != want {
				t.Fatalf("after %s: %q, want %q", d, got, want)
			}
		}
		p.Update("%d of %d pods left", 3, 3)
		step(0, "3 of 3 pods left\n")
		p.Update("2 of 3 pods left")
		step(500*time.Millisecond, "3 of 3 pods left\n")
		p.Update("1 of 3 pods left")
		step(plainInterval-500*time.Millisecond-time.Millisecond, "3 of 3 pods left\n")
		step(time.Millisecond, "3 of 3 pods left\n1 of 3 pods left\n")
		p.Update("1 of 3 pods left")
		step(plainInterval, "3 of 3 pods left\n1 of 3 pods left\n")
		p.Update("two\nlines")
		step(0, "3 of 3 pods left\n1 of 3 pods left\ntwo lines\n")
		p.Update("0 of 3 pods left")
		step(time.Second, "3 of 3 pods left\n1 of 3 pods left\ntwo lines\n")
		p.Done()
		step(0, "3 of 3 pods left\n1 of 3 pods left\ntwo lines\n0 of 3 pods left\n")
		p.Update("late")
		p.Done()
		step(time.Hour, "3 of 3 pods left\n1 of 3 pods left\ntwo lines\n0 of 3 pods left\n")
		if p.Terminal() {
			t.Error("a plain Progress says it is on a terminal")
		}
	})
}

// TestProgressTerminal: on a terminal, one line is rewritten in place, at
// most every terminalInterval, cut to the width; lasting lines written
// through Above scroll up above it; Done ends the line.
func TestProgressTerminal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b syncbuf.Buffer
		p := newProgress(&b, true, 20)
		var want strings.Builder
		check := func(what string) {
			t.Helper()
			synctest.Wait()
			if got := b.String(); got != want.String() {
				t.Fatalf("%s:\n got %q\nwant %q", what, got, want.String())
			}
		}
		p.Update("edge-1 0 B/1.0 MiB")
		want.WriteString("\redge-1 0 B/1.0 MiB\x1b[K")
		check("first status")

		p.Update("edge-1 512.0 KiB/1.0 MiB")
		p.Update("edge-1 768.0 KiB/1.0 MiB")
		check("held back")
		time.Sleep(terminalInterval)
		want.WriteString("\redge-1 768.0 KiB/1…\x1b[K") // 19 columns: never the last one
		check("redrawn, cut to the width")

		above := p.Above(&b)
		io.WriteString(above, "pod/web-1 evicted\n")
		want.WriteString("\r\x1b[Kpod/web-1 evicted\n\redge-1 768.0 KiB/1…\x1b[K")
		check("a lasting line above the status")

		time.Sleep(terminalInterval)
		p.Update("done")
		p.Done()
		want.WriteString("\rdone\x1b[K\n")
		check("Done")
		io.WriteString(above, "after\n")
		want.WriteString("after\n")
		check("a lasting line after Done")
	})
}

func TestProgressCut(t *testing.T) {
	for _, tc := range []struct {
		s     string
		width int
		want  string
	}{
		{"short", 80, "short"},
		{"exactly nine", 13, "exactly nine"},
		{"exactly ten!", 12, "exactly te…"},
		{"äöü-äöü", 5, "äöü…"},
		{"unknown width", 0, "unknown width"},
	} {
		if got := cut(tc.s, tc.width); got != tc.want {
			t.Errorf("cut(%q, %d) = %q, want %q", tc.s, tc.width, got, tc.want)
		}
	}
}

// TestProgressDetectsTerminals: files, pipes and /dev/null (a character
// device, but no terminal) get plain lines.
func TestProgressDetectsTerminals(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	var b syncbuf.Buffer
	for name, out := range map[string]io.Writer{"file": f, "/dev/null": null, "pipe": w, "buffer": &b} {
		if NewProgress(out).Terminal() {
			t.Errorf("%s taken for a terminal", name)
		}
	}
}
