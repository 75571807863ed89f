package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func TestFramesRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	fw := NewFrameWriter(&buf, nil)
	big := bytes.Repeat([]byte("x"), 2*MaxFramePayload+5)
	if _, err := fw.Stream(StreamStdout).Write([]byte("out1 ")); err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Stream(StreamStderr).Write([]byte("err1")); err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Stream(StreamStdout).Write(big); err != nil {
		t.Fatal(err)
	}
	if err := fw.WriteExit(ExitStatus{ExitCode: 7}); err != nil {
		t.Fatal(err)
	}
	// The big write was cut into frames no larger than the limit: 1 +
	// 1 + 3 data frames and the exit frame.
	frames := 0
	for b := buf.Bytes(); len(b) > 0; frames++ {
		n := binary.BigEndian.Uint32(b[1:5])
		if n > MaxFramePayload {
			t.Fatalf("frame %d carries %d bytes", frames, n)
		}
		b = b[5+n:]
	}
	if frames != 6 {
		t.Fatalf("%d frames, want 6", frames)
	}
	var out, errb bytes.Buffer
	st, err := ReadFrames(&buf, &out, &errb)
	if err != nil || st.ExitCode != 7 || st.Error != "" {
		t.Fatalf("ReadFrames: %+v %v", st, err)
	}
	if out.String() != "out1 "+string(big) || errb.String() != "err1" {
		t.Fatalf("stdout %d bytes, stderr %q", out.Len(), errb.String())
	}
}

func TestReadFramesBroken(t *testing.T) {
	var buf bytes.Buffer
	fw := NewFrameWriter(&buf, nil)
	_ = fw.WriteFrame(StreamStdout, []byte("partial"))
	whole := buf.Bytes()
	for name, tc := range map[string]struct {
		in   []byte
		want error
	}{
		"no exit frame":   {whole, ErrNoExitStatus},
		"cut in a header": {whole[:3], ErrNoExitStatus},
		"cut in payload":  {whole[:8], ErrNoExitStatus},
		"unknown stream":  {[]byte{9, 0, 0, 0, 1, 'x'}, ErrBadFrame},
		"oversized":       {[]byte{1, 0xff, 0xff, 0xff, 0xff}, ErrBadFrame},
		"bad exit json":   {[]byte{3, 0, 0, 0, 1, '{'}, ErrBadFrame},
	} {
		_, err := ReadFrames(bytes.NewReader(tc.in), nil, nil)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	if _, err := ReadFrames(strings.NewReader(""), nil, nil); !errors.Is(err, ErrNoExitStatus) {
		t.Errorf("empty: %v", err)
	}
}
