package containerd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/outpost-edge/outpost/runtime"
)

// The log file format, one entry per line, as the CRI's:
//
//	2026-11-23T22:00:00.123456789Z stdout F text of the line
//
// time (RFC 3339, UTC, nanoseconds), the stream, "F" for a full line or
// "P" for a piece of a longer one (or of a last line without a newline)
// that the next entry of the same stream continues, and the text without
// its newline. The time lets Logs add timestamps, the stream keeps the
// origin, and whole entries per write let two streams share one file.

// entry is one parsed log line.
type entry struct {
	time    []byte
	partial bool
	text    []byte
}

func parseEntry(line []byte) (entry, bool) {
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return entry{}, false
	}
	_, rest, ok = bytes.Cut(rest, []byte{' '}) // stream
	if !ok {
		return entry{}, false
	}
	tag, text, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return entry{}, false
	}
	return entry{time: ts, partial: string(tag) == "P", text: text}, true
}

// logFollowPoll is how often a follow looks for new output.
const logFollowPoll = 100 * time.Millisecond

// Logs writes container id's output per opts. The container must be
// outpost's; its log file may be absent (no output yet).
func (r *Runtime) Logs(ctx context.Context, id string, opts runtime.LogOptions, w io.Writer) error {
	if _, err := r.ContainerStatus(ctx, id); err != nil {
		return err
	}
	if opts.TailLines < 0 {
		return fmt.Errorf("tailLines: %d is negative", opts.TailLines)
	}
	return followFile(ctx, r.logPath(id), opts, w, func() bool {
		st, err := r.ContainerStatus(ctx, id)
		return err != nil || st.State == runtime.StateExited
	})
}

// followFile writes the log at path; with opts.Follow it goes on until
// ctx ends or exited reports true, after which it writes what is left.
func followFile(ctx context.Context, path string, opts runtime.LogOptions, w io.Writer, exited func() bool) error {
	lw := &logOut{w: w, timestamps: opts.Timestamps}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read log: %w", err)
	}
	// Only complete entries; a torn last one is read on the next round.
	end := bytes.LastIndexByte(data, '\n') + 1
	if err := lw.writeTail(data[:end], opts.TailLines); err != nil {
		return err
	}
	if !opts.Follow {
		return nil
	}
	offset := int64(end)
	t := time.NewTicker(logFollowPoll)
	defer t.Stop()
	for {
		done := false
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			// Decide before reading: what the writer wrote before the
			// exit was seen is then read below.
			done = exited()
		}
		n, err := lw.copyFrom(path, offset)
		offset += n
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// logOut turns entries back into the container's output.
type logOut struct {
	w          io.Writer
	timestamps bool
	// inLine is true while a partial entry's line is being continued.
	inLine bool
}

func (l *logOut) write(e entry) error {
	var buf []byte
	if l.timestamps && !l.inLine {
		buf = append(buf, e.time...)
		buf = append(buf, ' ')
	}
	buf = append(buf, e.text...)
	if !e.partial {
		buf = append(buf, '\n')
	}
	l.inLine = e.partial
	if _, err := l.w.Write(buf); err != nil {
		return fmt.Errorf("write log: %w", err)
	}
	return nil
}

// writeTail writes the last n logical lines of data (all if n is 0).
func (l *logOut) writeTail(data []byte, n int) error {
	var entries []entry
	for _, line := range bytes.Split(data, []byte{'\n'}) {
		if e, ok := parseEntry(line); ok {
			entries = append(entries, e)
		}
	}
	start := 0
	if n > 0 {
		lines := 0
		start = len(entries)
		for i := len(entries) - 1; i >= 0; i-- {
			if !entries[i].partial || i == len(entries)-1 {
				if lines == n {
					break
				}
				if !entries[i].partial {
					lines++
				}
			}
			start = i
		}
	}
	for _, e := range entries[start:] {
		if err := l.write(e); err != nil {
			return err
		}
	}
	return nil
}

// copyFrom writes the complete entries after offset and returns how many
// bytes it consumed.
func (l *logOut) copyFrom(path string, offset int64) (int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return 0, fmt.Errorf("read log: %w", err)
	}
	br := bufio.NewReader(f)
	var n int64
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			// EOF, possibly after a torn entry: leave it for next time.
			return n, nil
		}
		n += int64(len(line))
		if e, ok := parseEntry(line[:len(line)-1]); ok {
			if err := l.write(e); err != nil {
				return n, err
			}
		}
	}
}
