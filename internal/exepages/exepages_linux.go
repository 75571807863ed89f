package exepages

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Result says what Trim did.
type Result struct {
	// Mappings is how many read-only mappings of the executable were
	// trimmed; Bytes their length.
	Mappings int
	Bytes    uint64
}

// Trim drops this process's mappings of its executable's read-only
// segments (code, read-only data) and makes later faults there map
// single pages. Writable mappings (the data segment) are left alone:
// dropping a private page someone wrote would lose the write.
func Trim() (Result, error) {
	var res Result
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &st); err != nil {
		return res, fmt.Errorf("stat executable: %w", err)
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return res, fmt.Errorf("read mappings: %w", err)
	}
	regions, err := readOnlyRegions(smaps, uint64(st.Dev), st.Ino)
	if err != nil {
		return res, err
	}
	for _, r := range regions {
		// Random first: were the drop first, a fault between the two
		// calls would map a whole window again.
		if err := madvise(r.start, r.end-r.start, unix.MADV_RANDOM); err != nil {
			return res, fmt.Errorf("madvise random %#x-%#x: %w", r.start, r.end, err)
		}
		if err := madvise(r.start, r.end-r.start, unix.MADV_DONTNEED); err != nil {
			return res, fmt.Errorf("madvise dontneed %#x-%#x: %w", r.start, r.end, err)
		}
		res.Mappings++
		res.Bytes += r.end - r.start
	}
	return res, nil
}

// madvise takes the address as a number: the region is the executable's
// own mapping, never memory the Go runtime manages.
func madvise(addr, length uint64, advice int) error {
	_, _, errno := syscall.Syscall(syscall.SYS_MADVISE, uintptr(addr), uintptr(length), uintptr(advice))
	if errno != 0 {
		return errno
	}
	return nil
}

type region struct {
	start, end uint64
	anon       bool // holds pages of its own: never dropped
}

// readOnlyRegions returns the mappings in smaps (the text of
// /proc/PID/smaps) of the file with device dev and inode ino that are not
// writable and hold no page of their own (Anonymous: 0 kB). A read-only
// mapping can hold written pages: a dynamically linked binary's
// relocations (RELRO) are written at load and then made read-only, and
// dropping them would bring back the file's unrelocated bytes.
func readOnlyRegions(smaps []byte, dev, ino uint64) ([]region, error) {
	var out []region
	var cur *region // the mapping being read, if it is a candidate
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			// address perms offset dev inode path
			cur = nil
			if n, err := strconv.ParseUint(f[4], 10, 64); err != nil || n != ino {
				continue
			}
			if d, ok := parseDev(f[3]); !ok || d != dev {
				continue
			}
			if len(f[1]) < 2 || f[1][1] == 'w' {
				continue
			}
			lo, hi, ok := strings.Cut(f[0], "-")
			if !ok {
				return nil, fmt.Errorf("mapping %q: no address range", line)
			}
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil || end <= start {
				return nil, fmt.Errorf("mapping %q: bad address range", line)
			}
			out = append(out, region{start: start, end: end})
			cur = &out[len(out)-1]
			continue
		}
		if cur != nil && len(f) >= 2 && f[0] == "Anonymous:" {
			cur.anon = f[1] != "0"
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	kept := out[:0]
	for _, r := range out {
		if !r.anon {
			kept = append(kept, r)
		}
	}
	return kept, nil
}

// parseDev reads maps' "major:minor" (hex) as the kernel's encoding of a
// device number, which stat returns.
func parseDev(s string) (uint64, bool) {
	maj, min, ok := strings.Cut(s, ":")
	if !ok {
		return 0, false
	}
	a, err1 := strconv.ParseUint(maj, 16, 32)
	b, err2 := strconv.ParseUint(min, 16, 32)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return unix.Mkdev(uint32(a), uint32(b)), true
}
