package exepages

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

func TestReadOnlyRegions(t *testing.T) {
	smaps := []byte(`00400000-01200000 r-xp 00000000 fe:00 1234 /usr/local/bin/outpost
Size:              14336 kB
Rss:               13000 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
01200000-02200000 r--p 00e00000 fe:00 1234 /usr/local/bin/outpost
Size:              16384 kB
Anonymous:             0 kB
02200000-02210000 r--p 01e00000 fe:00 1234 /usr/local/bin/outpost
Size:                 64 kB
Anonymous:             8 kB
02210000-02300000 rw-p 01e10000 fe:00 1234 /usr/local/bin/outpost
Anonymous:            40 kB
02300000-02400000 rw-p 00000000 00:00 0
Anonymous:          1024 kB
03000000-03001000 r--p 00000000 fe:00 999 /usr/lib/other
Anonymous:             0 kB
04000000-04001000 r--p 00000000 fe:01 1234 /mnt/same-inode-other-device
Anonymous:             0 kB
7ffc0000-7ffc1000 r-xp 00000000 00:00 0 [vdso]
`)
	got, err := readOnlyRegions(smaps, unix.Mkdev(0xfe, 0), 1234)
	if err != nil {
		t.Fatal(err)
	}
	want := []region{{start: 0x400000, end: 0x1200000}, {start: 0x1200000, end: 0x2200000}}
	if !slices.Equal(got, want) {
		t.Errorf("regions %+v, want the executable's two read-only ones %+v (not its relocated read-only page, its data segment, nor another file)", got, want)
	}
	if _, err := readOnlyRegions([]byte("zz-yy r--p 0 fe:00 1234 /x\n"), unix.Mkdev(0xfe, 0), 1234); err == nil {
		t.Error("a bad address range gave no error")
	}
}

// exeMapping is one of the executable's mappings as /proc/self/smaps
// shows it.
type exeMapping struct {
	perms string
	rss   uint64
	flags []string
}

func exeMappings(t *testing.T) []exeMapping {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &st); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	var out []exeMapping
	var cur *exeMapping
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			cur = nil
			if ino, _ := strconv.ParseUint(f[4], 10, 64); ino == st.Ino {
				out = append(out, exeMapping{perms: f[1]})
				cur = &out[len(out)-1]
			}
			continue
		}
		switch {
		case cur == nil || len(f) < 2:
		case f[0] == "Rss:":
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			cur.rss = kb << 10
		case f[0] == "VmFlags:":
			cur.flags = f[1:]
		}
	}
	return out
}

// readOnlyData is the resident size of the executable's read-only,
// not executable mappings: its read-only data and tables, which a
// program touches little of once started.
func readOnlyData(ms []exeMapping) (n uint64) {
	for _, m := range ms {
		if m.perms[1] != 'w' && m.perms[2] != 'x' {
			n += m.rss
		}
	}
	return n
}

// Trim drops the executable's read-only mappings and asks for single-page
// faults there; the data segment is left as it is; the program goes on
// running.
func TestTrim(t *testing.T) {
	before := exeMappings(t)
	res, err := Trim()
	if err != nil {
		t.Fatal(err)
	}
	after := exeMappings(t)
	if res.Mappings < 2 {
		t.Fatalf("Trim found %d mappings of the executable, want its code and read-only data", res.Mappings)
	}
	for _, m := range after {
		random := slices.Contains(m.flags, "rr")
		if writable := m.perms[1] == 'w'; random == writable {
			t.Errorf("mapping %s: random-read advice %v", m.perms, random)
		}
	}
	// Code faults back in whole page-cache folios on kernels with large
	// folios (this one), so only the data shows the drop everywhere.
	b, a := readOnlyData(before), readOnlyData(after)
	t.Logf("read-only data resident: %d KiB before, %d KiB after", b>>10, a>>10)
	// Measured: 40-60 % of before stays (what this test and the runtime
	// touch again at once); without Trim all of it does.
	if a*10 > b*9 {
		t.Errorf("read-only data resident %d KiB after Trim, %d KiB before: want under nine tenths", a>>10, b>>10)
	}
	// New threads, which a binary linked with libc starts through its
	// relocated symbol table (RELRO): a dropped relocated page would
	// send them to address 0.
	var wg sync.WaitGroup
	release := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			runtime.LockOSThread()
			<-release
		})
	}
	close(release)
	wg.Wait()
	if _, err := user.Current(); err != nil {
		t.Logf("user.Current after Trim: %v", err)
	}
	var sb strings.Builder
	for i := range 1000 {
		sb.WriteString(strconv.Itoa(i))
	}
	if sb.Len() != 2890 {
		t.Errorf("formatting after Trim gave %d bytes", sb.Len())
	}
}

// A binary linked by the system linker has relocated pages in a read-only
// mapping (RELRO); Trim must leave them, or the next thread start or C
// call jumps to an unrelocated address (the agent's race-built tests
// crashed so). The helper is built that way, trims, then starts threads
// and calls C.
func TestTrimExternallyLinked(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "exttrim")
	build := exec.Command("go", "build", "-ldflags=-linkmode=external", "-o", bin, "./testdata/exttrim")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the externally linked helper: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).CombinedOutput()
	got := strings.TrimSpace(string(out))
	if err != nil || !strings.HasPrefix(got, "ok ") || !strings.HasSuffix(got, " 14") {
		t.Fatalf("helper after Trim: %v\n%s", err, lastLines(got, 20))
	}
	if got == "ok 0 14" {
		t.Error("the helper trimmed no mapping: the test shows nothing")
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(s, "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}
