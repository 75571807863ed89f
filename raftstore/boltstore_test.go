package raftstore

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func openTestStore(t testing.TB) (*boltStore, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "raft.db")
	s, err := openBoltStore(path, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func TestLogEncodingRoundTrip(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	tests := []raft.Log{
		{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("set a b")},
		{Index: 1 << 40, Term: 77, Type: raft.LogConfiguration, Data: bytes.Repeat([]byte{7}, 5000), Extensions: []byte("ext"), AppendedAt: at},
		{Index: 3, Term: 2, Type: raft.LogNoop},
		{Index: 4, Term: 2, Type: raft.LogCommand, Extensions: readBarrierExt},
	}
	for _, want := range tests {
		buf := make([]byte, encodedLogSize(&want))
		encodeLog(buf, &want)
		var got raft.Log
		if err := decodeLog(buf, &got); err != nil {
			t.Fatalf("decode %d: %v", want.Index, err)
		}
		if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type ||
			!bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Extensions, want.Extensions) || !got.AppendedAt.Equal(want.AppendedAt) {
			t.Errorf("round trip of %+v gave %+v", want, got)
		}
		// Decoded slices must not alias the (transaction-owned) input.
		if len(got.Data) > 0 {
			buf[len(buf)-1-len(got.Extensions)-1] ^= 0xff
			if !bytes.Equal(got.Data, want.Data) {
				t.Error("decoded data aliases the encoded buffer")
			}
		}
		// Every truncation is an error, never a panic.
		encodeLog(buf, &want)
		for i := range len(buf) {
			if err := decodeLog(buf[:i], &got); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode of %d/%d bytes: %v, want ErrCorrupt", i, len(buf), err)
			}
		}
	}
}

func FuzzDecodeLog(f *testing.F) {
	l := raft.Log{Index: 5, Term: 2, Data: []byte("set a b"), Extensions: []byte("x"), AppendedAt: time.Unix(1, 2)}
	buf := make([]byte, encodedLogSize(&l))
	encodeLog(buf, &l)
	f.Add(buf)
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		var l raft.Log
		_ = decodeLog(b, &l)
	})
}

func TestBoltStoreLogsAndStable(t *testing.T) {
	s, path := openTestStore(t)
	if f, _ := s.FirstIndex(); f != 0 {
		t.Fatalf("empty store first index %d", f)
	}
	var logs []*raft.Log
	for i := uint64(1); i <= 100; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1 + i/50, Data: []byte(fmt.Sprint("cmd", i))})
	}
	if err := s.StoreLogs(logs[:64]); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs(logs[64:]); err != nil {
		t.Fatal(err)
	}
	bounds := func() (uint64, uint64) {
		f, _ := s.FirstIndex()
		l, _ := s.LastIndex()
		return f, l
	}
	if f, l := bounds(); f != 1 || l != 100 {
		t.Fatalf("bounds %d-%d, want 1-100", f, l)
	}
	var got raft.Log
	if err := s.GetLog(42, &got); err != nil || string(got.Data) != "cmd42" || got.Term != 1 {
		t.Fatalf("GetLog(42) = %+v, %v", got, err)
	}
	if err := s.GetLog(101, &got); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog(101): %v, want ErrLogNotFound", err)
	}
	// Compaction from the front, conflict truncation from the back.
	if err := s.DeleteRange(1, 30); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(91, 100); err != nil {
		t.Fatal(err)
	}
	if f, l := bounds(); f != 31 || l != 90 {
		t.Fatalf("bounds after deletes %d-%d, want 31-90", f, l)
	}
	for _, i := range []uint64{1, 30, 91, 100} {
		if err := s.GetLog(i, &got); !errors.Is(err, raft.ErrLogNotFound) {
			t.Errorf("GetLog(%d) after delete: %v", i, err)
		}
	}

	if v, err := s.Get([]byte("missing")); v != nil || err != nil {
		t.Errorf("Get(missing) = %q, %v; want nil, nil", v, err)
	}
	if v, err := s.GetUint64([]byte("missing")); v != 0 || err != nil {
		t.Errorf("GetUint64(missing) = %d, %v", v, err)
	}
	if err := s.Set([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("term"), 9); err != nil {
		t.Fatal(err)
	}

	// Everything survives a reopen.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := openBoltStore(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s2.Close() }()
	s = s2
	if f, l := bounds(); f != 31 || l != 90 {
		t.Fatalf("bounds after reopen %d-%d", f, l)
	}
	if v, _ := s.Get([]byte("k")); string(v) != "v" {
		t.Errorf("Get(k) after reopen = %q", v)
	}
	if v, _ := s.GetUint64([]byte("term")); v != 9 {
		t.Errorf("GetUint64(term) after reopen = %d", v)
	}
	if err := s.GetLog(90, &got); err != nil || string(got.Data) != "cmd90" {
		t.Errorf("GetLog(90) after reopen = %+v, %v", got, err)
	}
}

// crashChildEnv makes the test binary act as a writer that is killed.
const crashChildEnv = "RAFTSTORE_CRASH_CHILD_DB"

// TestBoltStoreCrashChild is the child half of TestBoltStoreSurvivesKill:
// it stores batches and prints "ack N" after each StoreLogs returns.
func TestBoltStoreCrashChild(t *testing.T) {
	path := os.Getenv(crashChildEnv)
	if path == "" {
		t.Skip("only runs as the child of TestBoltStoreSurvivesKill")
	}
	s, err := openBoltStore(path, false)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	crashChildWrites(s)
}

func TestBoltStoreSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	path := filepath.Join(t.TempDir(), "raft.db")
	acked := killAfterAcks(t, "TestBoltStoreCrashChild", crashChildEnv+"="+path, 400)

	s, err := openBoltStore(path, false)
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer func() { _ = s.Close() }()
	last, _ := s.LastIndex()
	if last < acked {
		t.Fatalf("last index %d after kill, but %d were acknowledged", last, acked)
	}
	checkLog(t, s, 1, last)
}

// crashChildWrites is the child of a kill test: it stores batches of 8
// entries and prints "ack N" after each StoreLogs returns.
func crashChildWrites(s raft.LogStore) {
	out := bufio.NewWriter(os.Stdout)
	next := uint64(1)
	for batch := 0; batch < 20000; batch++ { // bounded: the parent kills it long before
		if err := s.StoreLogs(entries(next, next+7)); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		next += 8
		fmt.Fprintf(out, "ack %d\n", next-1)
		_ = out.Flush()
	}
	os.Exit(0)
}

// killAfterAcks runs child (a test of this binary, told where to write by
// env) until it printed "ack N" with N ≥ min, kills it with SIGKILL while
// it writes on, and returns the last N it printed.
func killAfterAcks(t *testing.T, child, env string, atLeast uint64) uint64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked uint64
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "error") {
			_ = cmd.Process.Kill()
			t.Fatalf("child: %s", line)
		}
		if n, ok := strings.CutPrefix(line, "ack "); ok {
			acked, _ = strconv.ParseUint(n, 10, 64)
			if acked >= atLeast {
				break
			}
		}
	}
	// kill -9 while it is writing the next batches.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = bufio.NewReader(stdout).ReadString(0)
	_ = cmd.Wait()
	if acked < atLeast {
		t.Fatalf("child acknowledged only %d entries", acked)
	}
	return acked
}

// BenchmarkStoreLogs64x1KiB measures the write path raft uses: one
// StoreLogs (one transaction, one fsync) per 64-entry batch of 1 KiB.
func BenchmarkStoreLogs64x1KiB(b *testing.B) {
	s, _ := openTestStore(b)
	benchStoreLogs(b, s)
}

func benchStoreLogs(b *testing.B, s raft.LogStore) {
	data := bytes.Repeat([]byte("x"), 1024)
	logs := make([]*raft.Log, 64)
	for i := range logs {
		logs[i] = &raft.Log{Term: 1, Data: data, AppendedAt: time.Now()}
	}
	next := uint64(1)
	b.SetBytes(64 * 1024)
	b.ReportAllocs()
	for b.Loop() {
		for _, l := range logs {
			l.Index = next
			next++
		}
		if err := s.StoreLogs(logs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*64)/b.Elapsed().Seconds(), "entries/s")
}

func BenchmarkGetLog1KiB(b *testing.B) {
	s, _ := openTestStore(b)
	data := bytes.Repeat([]byte("x"), 1024)
	logs := make([]*raft.Log, 1024)
	for i := range logs {
		logs[i] = &raft.Log{Index: uint64(i + 1), Term: 1, Data: data}
	}
	if err := s.StoreLogs(logs); err != nil {
		b.Fatal(err)
	}
	var l raft.Log
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		if err := s.GetLog(i%1024+1, &l); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// A compaction larger than one delete chunk removes the whole range, and
// appends can run between its chunks.
func TestBoltStoreDeleteRangeInChunks(t *testing.T) {
	s, _ := openTestStore(t)
	total := uint64(3*deleteChunk + 17)
	var logs []*raft.Log
	for i := uint64(1); i <= total; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Data: []byte("x")})
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.DeleteRange(1, total-10) }()
	// An append while the compaction runs must not wait for all of it.
	if err := s.StoreLogs([]*raft.Log{{Index: total + 1, Term: 1, Data: []byte("y")}}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	if f != total-9 || l != total+1 {
		t.Fatalf("bounds %d-%d, want %d-%d", f, l, total-9, total+1)
	}
	var got raft.Log
	if err := s.GetLog(total-10, &got); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog(%d) after compaction: %v", total-10, err)
	}
}

// A DeleteRange stopped after any of its chunks, as by a crash, leaves a
// contiguous log on disk: a prefix deletion trims it from the bottom, a
// suffix deletion (raft truncating a conflicting tail) from the top. A
// suffix deleted bottom-up left a hole that made GetLog fail inside
// [FirstIndex, LastIndex] (issue 9 item 2).
func TestBoltStoreDeleteRangeCrashLeavesNoHole(t *testing.T) {
	const total = 3*deleteChunk + 17
	cases := []struct {
		name   string
		lo, hi uint64
	}{
		{"prefix", 1, total - 100},
		{"suffix", 1000, total},
		{"suffix past the end", 500, 1 << 63},
	}
	for _, tc := range cases {
		chunks := int((min(tc.hi, total)-tc.lo)/deleteChunk) + 1
		for stopAfter := 1; stopAfter < chunks; stopAfter++ {
			t.Run(fmt.Sprintf("%s/crash after chunk %d", tc.name, stopAfter), func(t *testing.T) {
				s, path := openTestStore(t)
				var logs []*raft.Log
				for i := uint64(1); i <= total; i++ {
					logs = append(logs, &raft.Log{Index: i, Term: 1, Data: []byte("x")})
				}
				if err := s.StoreLogs(logs); err != nil {
					t.Fatal(err)
				}
				crash := errors.New("power cut")
				n := 0
				afterDeleteChunk = func() error {
					if n++; n == stopAfter {
						return crash
					}
					return nil
				}
				t.Cleanup(func() { afterDeleteChunk = nil })
				if err := s.DeleteRange(tc.lo, tc.hi); !errors.Is(err, crash) {
					t.Fatalf("DeleteRange: %v, want the planted crash", err)
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				r, err := openBoltStore(path, false)
				if err != nil {
					t.Fatalf("reopen: %v", err)
				}
				defer r.Close()
				first, _ := r.FirstIndex()
				last, _ := r.LastIndex()
				for i := first; i <= last; i++ {
					var l raft.Log
					if err := r.GetLog(i, &l); err != nil {
						t.Fatalf("log %d-%d on disk, GetLog(%d): %v: a hole", first, last, i, err)
					}
				}
				removed := uint64(stopAfter * deleteChunk)
				if tc.lo == 1 {
					if first != 1+removed || last != total {
						t.Fatalf("bounds %d-%d, want %d-%d", first, last, 1+removed, total)
					}
				} else if first != 1 || last != total-removed {
					t.Fatalf("bounds %d-%d, want 1-%d", first, last, total-removed)
				}
			})
		}
	}
}
