package wire

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Errors of this package.
var (
	// ErrBadFrame is a frame with an unknown stream or an oversized
	// payload: the stream is not an exec reply, or it is corrupt.
	ErrBadFrame = errors.New("malformed exec frame")
	// ErrNoExitStatus is an exec reply that ended before its exit frame.
	ErrNoExitStatus = errors.New("exec stream ended without an exit status; the command's outcome is unknown")
)

// Streams of an exec reply.
const (
	StreamStdout byte = 1
	StreamStderr byte = 2
	StreamExit   byte = 3
)

// MaxFramePayload bounds a frame's payload, so that a reader never holds
// more than this in memory for one frame.
const MaxFramePayload = 32 << 10

// headerLen is the size of a frame header.
const headerLen = 5

// ContentTypeExec is the media type of an exec reply body.
const ContentTypeExec = "application/vnd.outpost.exec-stream"

// ExitStatus is the payload of the exit frame. Error is set when the
// command could not be run at all (it does not exist, the container
// stopped); ExitCode is then meaningless.
type ExitStatus struct {
	ExitCode int    `json:"exitCode"`
	Error    string `json:"error,omitempty"`
}

// Image is one image an import loaded, as the endpoint reports it.
type Image struct {
	Names  []string `json:"names"`
	Digest string   `json:"digest,omitempty"`
	Size   int64    `json:"size,omitempty"`
}

// ImageList is the reply to an image import.
type ImageList struct {
	Kind   string  `json:"kind"`
	Images []Image `json:"images"`
}

// KindImageList is ImageList's kind.
const KindImageList = "ImageList"

// FrameWriter writes frames to one underlying writer. It is safe for
// concurrent use, so stdout and stderr may be copied by two goroutines;
// after each frame it calls Flush, when set, so that output reaches the
// caller as it is produced.
type FrameWriter struct {
	mu    sync.Mutex
	w     io.Writer
	flush func()
	buf   []byte
}

// NewFrameWriter returns a FrameWriter on w; flush may be nil.
func NewFrameWriter(w io.Writer, flush func()) *FrameWriter {
	return &FrameWriter{w: w, flush: flush}
}

// WriteFrame writes p on stream as one or more frames.
func (f *FrameWriter) WriteFrame(stream byte, p []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(p) > 0 {
		n := min(len(p), MaxFramePayload)
		f.buf = append(f.buf[:0], stream, 0, 0, 0, 0)
		binary.BigEndian.PutUint32(f.buf[1:headerLen], uint32(n))
		f.buf = append(f.buf, p[:n]...)
		if _, err := f.w.Write(f.buf); err != nil {
			return fmt.Errorf("write exec frame: %w", err)
		}
		p = p[n:]
	}
	if f.flush != nil {
		f.flush()
	}
	return nil
}

// WriteExit writes the exit frame.
func (f *FrameWriter) WriteExit(st ExitStatus) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode exit status: %w", err)
	}
	return f.WriteFrame(StreamExit, b)
}

// Stream returns an io.Writer whose writes become frames on stream.
func (f *FrameWriter) Stream(stream byte) io.Writer { return streamWriter{f, stream} }

type streamWriter struct {
	f      *FrameWriter
	stream byte
}

func (s streamWriter) Write(p []byte) (int, error) {
	if err := s.f.WriteFrame(s.stream, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// ReadFrames reads an exec reply from r until its exit frame, copying
// stdout and stderr payloads to the writers (either may be nil to
// discard), and returns the exit status. A body that ends first gives
// ErrNoExitStatus; a corrupt one ErrBadFrame.
func ReadFrames(r io.Reader, stdout, stderr io.Writer) (ExitStatus, error) {
	var hdr [headerLen]byte
	buf := make([]byte, 0, 4096)
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return ExitStatus{}, ErrNoExitStatus
			}
			return ExitStatus{}, fmt.Errorf("read exec frame: %w", err)
		}
		n := binary.BigEndian.Uint32(hdr[1:])
		if n > MaxFramePayload {
			return ExitStatus{}, fmt.Errorf("%w: payload of %d bytes exceeds %d", ErrBadFrame, n, MaxFramePayload)
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return ExitStatus{}, ErrNoExitStatus
			}
			return ExitStatus{}, fmt.Errorf("read exec frame: %w", err)
		}
		var dst io.Writer
		switch hdr[0] {
		case StreamStdout:
			dst = stdout
		case StreamStderr:
			dst = stderr
		case StreamExit:
			var st ExitStatus
			if err := json.Unmarshal(buf, &st); err != nil {
				return ExitStatus{}, fmt.Errorf("%w: exit status: %w", ErrBadFrame, err)
			}
			return st, nil
		default:
			return ExitStatus{}, fmt.Errorf("%w: unknown stream %d", ErrBadFrame, hdr[0])
		}
		if dst != nil {
			if _, err := dst.Write(buf); err != nil {
				return ExitStatus{}, fmt.Errorf("copy exec output: %w", err)
			}
		}
	}
}
