package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
	"unicode/utf8"
)

// Progress shows how far a long operation has come (issue 15 item 8:
// image import, drain, adm upgrade --wait, install). It owns one status
// line on a writer, usually stderr:
//
//   - On a terminal the line is rewritten in place ("\r", the text, erase
//     to the end of the line), cut to the terminal's width so that it
//     never wraps, at most every terminalInterval.
//   - Elsewhere (a pipe, a file, a CI log) each new status is printed as
//     a plain line, at most every plainInterval, so that logs stay short;
//     a status held back is printed when the interval is over, and the
//     last one always is, by Done.
//
// Lines that must stay (what was done, warnings) go through Above, which
// moves the status line out of their way on a terminal. A Progress is
// safe for concurrent use.
//
//	p := NewProgress(cmd.ErrOrStderr())
//	for i, n := range nodes {
//		p.Update("updating %d/%d nodes: %s", i, len(nodes), n)
//		...
//	}
//	p.Done()
type Progress struct {
	w        io.Writer
	terminal bool
	width    int // terminal columns; 0: unknown, lines are not cut
	interval time.Duration

	mu       sync.Mutex
	status   string    // the latest status
	shown    string    // the status last written
	lastShow time.Time // when it was
	pending  *time.Timer
	onScreen bool // terminal: the status line is drawn, the cursor at its end
	done     bool
}

// How often a Progress writes at most; tests change them.
var (
	terminalInterval = 200 * time.Millisecond
	plainInterval    = 2 * time.Second
)

// NewProgress returns a Progress on w, which rewrites its line when w is
// a terminal (and $TERM is not "dumb") and prints plain lines otherwise.
func NewProgress(w io.Writer) *Progress {
	terminal, width := false, 0
	if f, ok := w.(*os.File); ok && os.Getenv("TERM") != "dumb" {
		terminal, width = terminalSize(f)
	}
	return newProgress(w, terminal, width)
}

// newProgress is NewProgress with the terminal's answer given: tests
// stand for a terminal with a buffer.
func newProgress(w io.Writer, terminal bool, width int) *Progress {
	p := &Progress{w: w, terminal: terminal, width: width, interval: plainInterval}
	if terminal {
		p.interval = terminalInterval
	}
	return p
}

// Terminal reports whether p rewrites one line rather than printing lines.
func (p *Progress) Terminal() bool { return p.terminal }

// Update sets the status to the formatted text (one line; a newline in it
// is replaced by a space). It is written now if the interval since the
// last write is over, else when it is, unless a newer status came first.
// After Done it does nothing.
func (p *Progress) Update(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	s = string(bytes.ReplaceAll([]byte(s), []byte("\n"), []byte(" ")))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	p.status = s
	if s == p.shown || p.pending != nil {
		return
	}
	if wait := p.interval - time.Since(p.lastShow); wait > 0 {
		p.pending = time.AfterFunc(wait, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.pending = nil
			if !p.done {
				p.show()
			}
		})
		return
	}
	p.show()
}

// show writes the status if it is not the one shown; p.mu is held.
func (p *Progress) show() {
	if p.status == p.shown && (p.onScreen || !p.terminal) {
		return
	}
	p.shown, p.lastShow = p.status, time.Now()
	if !p.terminal {
		_, _ = io.WriteString(p.w, p.status+"\n")
		return
	}
	_, _ = io.WriteString(p.w, "\r"+cut(p.status, p.width)+"\x1b[K")
	p.onScreen = true
}

// cut shortens s to fit width columns less one (a line that fills the
// last column wraps on some terminals), ending it with "…".
func cut(s string, width int) string {
	if width <= 1 || utf8.RuneCountInString(s) < width {
		return s
	}
	r := []rune(s)
	return string(r[:width-2]) + "…"
}

// Done writes the last status, if it has not been, and ends the status
// line; the Progress writes nothing more. Call it once the operation is
// over, whether it succeeded or not.
func (p *Progress) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	p.done = true
	if p.pending != nil {
		p.pending.Stop()
		p.pending = nil
	}
	if p.status != "" {
		p.show()
	}
	if p.onScreen {
		_, _ = io.WriteString(p.w, "\n")
		p.onScreen = false
	}
}

// Above returns a writer for lasting lines (to w, which may be p's own
// writer or another on the same screen): on a terminal the status line is
// erased before each write and drawn again after it, so that the lines
// scroll up above it. Write whole lines through it.
func (p *Progress) Above(w io.Writer) io.Writer { return &aboveWriter{p: p, w: w} }

type aboveWriter struct {
	p *Progress
	w io.Writer
}

func (a *aboveWriter) Write(b []byte) (int, error) {
	p := a.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.onScreen {
		_, _ = io.WriteString(p.w, "\r\x1b[K")
		p.onScreen = false
	}
	n, err := a.w.Write(b)
	if p.terminal && !p.done && p.status != "" && bytes.HasSuffix(b, []byte("\n")) {
		p.show()
	}
	return n, err
}

// newProgressOn makes the commands' Progress; tests replace it to stand
// for a terminal.
var newProgressOn = NewProgress
