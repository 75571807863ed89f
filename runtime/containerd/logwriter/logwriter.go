package logwriter

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Arg is the first argument with which containerd's shim runs
// the log writer (Config.LogWriter), followed by the log file's path.
const Arg = "outpost-container-log-writer"

// RunIfAsked turns this process into a container's log writer
// when it was started as one (os.Args[1] == Arg) and then exits;
// otherwise it returns at once. The outpost binary's main and any test
// binary that runs real containers call it before anything else.
//
// The shim starts the writer with the container's stdout on fd 3, stderr
// on fd 4 and a pipe on fd 5 that it closes to say it is ready (the
// "binary://" logging protocol of containerd's shims). The writer outlives
// the agent: it is the shim's child.
func RunIfAsked() {
	if len(os.Args) < 3 || os.Args[1] != Arg {
		return
	}
	if os.Args[2] == logWriterProbe {
		fmt.Println(logWriterProbeReply)
		os.Exit(0)
	}
	os.Exit(runLogWriter(os.Args[2]))
}

// Probe runs the log writer with this argument to check that it is one: an
// executable whose main does not call RunLogWriterIfAsked would make
// every container's output pipe break.
const (
	logWriterProbe      = "--probe"
	logWriterProbeReply = "outpost log writer ready"
)

// probeEnv marks the probe's process, so that an executable that is not a
// log writer (a test binary without the hook runs its tests instead) and
// calls New again does not probe in turn.
const probeEnv = "OUTPOST_LOG_WRITER_PROBE"

// Probe reports (as an error) whether exe does not answer as a log
// writer.
func Probe(ctx context.Context, exe string) error {
	if os.Getenv(probeEnv) != "" {
		return errors.New("inside a log writer probe: this executable is not a log writer")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, Arg, logWriterProbe)
	cmd.Env = append(os.Environ(), probeEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("run %s %s %s: %w", exe, Arg, logWriterProbe, err)
	}
	if strings.TrimSpace(string(out)) != logWriterProbeReply {
		return fmt.Errorf("%s does not act as a log writer (its main must call logwriter.RunIfAsked first)", exe)
	}
	return nil
}

// drainAfterTerm is how long the writer keeps copying after the shim's
// SIGTERM (sent once the container's pipes are closed), in case a
// descendant of the container still holds them open.
const drainAfterTerm = 2 * time.Second

func runLogWriter(path string) int {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	ready := os.NewFile(5, "ready")
	if err != nil {
		fmt.Fprintf(os.Stderr, "outpost log writer: %v\n", err)
		if ready != nil {
			ready.Close()
		}
		return 1
	}
	defer f.Close()
	stdout, stderr := os.NewFile(3, "stdout"), os.NewFile(4, "stderr")
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	if ready != nil {
		ready.Close()
	}
	w := NewWriter(f)
	var wg sync.WaitGroup
	for _, s := range []struct {
		name string
		r    *os.File
	}{{"stdout", stdout}, {"stderr", stderr}} {
		if s.r == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.Copy(s.name, s.r)
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-term:
		select {
		case <-done:
		case <-time.After(drainAfterTerm):
		}
	}
	return 0
}

// MaxLine is the longest piece of a line written as one entry; longer
// lines are split into partial entries.
const MaxLine = 16 << 10

// Writer writes entries of the log format to one file from both streams;
// each entry is one write, so entries never interleave.
type Writer struct {
	mu sync.Mutex
	f  io.Writer
}

// NewWriter returns a Writer appending to f.
func NewWriter(f io.Writer) *Writer { return &Writer{f: f} }

// Copy writes r's lines as entries of stream until r ends.
func (w *Writer) Copy(stream string, r io.Reader) {
	br := bufio.NewReaderSize(r, MaxLine)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			tag := "P"
			if line[len(line)-1] == '\n' {
				tag = "F"
				line = line[:len(line)-1]
			}
			w.write(stream, tag, line)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

func (w *Writer) write(stream, tag string, text []byte) {
	buf := make([]byte, 0, len(text)+64)
	buf = time.Now().UTC().AppendFormat(buf, time.RFC3339Nano)
	buf = append(buf, ' ')
	buf = append(buf, stream...)
	buf = append(buf, ' ')
	buf = append(buf, tag...)
	buf = append(buf, ' ')
	buf = append(buf, text...)
	buf = append(buf, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	// A failed write has nowhere to be reported: the writer has no
	// terminal and the shim ignores its stderr.
	_, _ = w.f.Write(buf)
}
