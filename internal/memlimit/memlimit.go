package memlimit

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strings"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/runtime/cgroups"
)

// FlagUsage is the help of --memory-limit.
const FlagUsage = `soft memory limit of this process: a size (600Mi, 1Gi, 500M; 0 or none for no limit), or auto. ` +
	`The Go collector works harder as the heap nears it, instead of letting the heap grow to twice what is live. ` +
	`auto: GOMEMLIMIT if set (off: none), else 90% of the lowest memory limit of the cgroup this process runs in and its parents ` +
	`(a systemd unit's MemoryMax= or MemoryHigh=, a container's memory limit), ` +
	`else one that follows the live heap: at least 560 MiB (below it the collector keeps its default pace), above that what is live plus 64 MiB or an eighth of it, plus the runtime's own. ` +
	`A size given here also lets the collector wait for more garbage below it (GOGC=200, unless GOGC is set), so the heap may grow towards the limit. ` +
	`Set it well above what the process holds live (a server with 150,000 pods holds about 320-400 MiB after a collection): below that the collector runs continuously`

// Auto is the default value of the flag.
const Auto = "auto"

// cgroupShare is the part of a cgroup's limit given to the Go heap: the
// rest is for what the runtime does not count, the binary's pages and the
// bbolt files' page cache charged to the same cgroup.
const cgroupShare = 0.9

// gcPercentUnderLimit is GOGC under a limit given as a size (and no
// GOGC): the operator sized the budget, so below it the collector may
// wait for more garbage than GOGC=100 would, and spends less CPU on small
// heaps. A limit found in a cgroup (auto) keeps GOGC=100: a container's
// limit is a ceiling, and a Kubernetes user does not expect setting one
// to make the process use more.
const gcPercentUnderLimit = 200

// minLimit is the least limit accepted: below it even an idle server
// would collect without pause.
const minLimit = 64 << 20

// Spec is a parsed --memory-limit.
type Spec struct {
	auto  bool
	bytes int64 // 0: none
}

// Parse reads a --memory-limit value; flag names it in errors.
func Parse(flag, value string) (Spec, error) {
	switch v := strings.TrimSpace(value); v {
	case "", Auto:
		return Spec{auto: true}, nil
	case "none", "0":
		return Spec{}, nil
	default:
		q, err := api.ParseQuantity(v)
		if err != nil {
			return Spec{}, fmt.Errorf("%s %q: not a size (600Mi, 1Gi, 500M), auto or none: %w", flag, value, err)
		}
		n := q.Value()
		if n < minLimit {
			return Spec{}, fmt.Errorf("%s %q: at least 64Mi, or none", flag, value)
		}
		return Spec{bytes: n}, nil
	}
}

// Limit is the limit Apply set, and where it came from.
type Limit struct {
	// Bytes is the soft limit; 0 is none.
	Bytes int64
	// From says where it came from, for the log.
	From string
	// GCPercent is GOGC to set with it; 0 leaves GOGC alone.
	GCPercent int
	// Follow: no limit was given or found, so the limit follows the
	// live heap (follow.go); Bytes is 0.
	Follow bool
}

// String is the limit for people.
func (l Limit) String() string {
	if l.Follow {
		return fmt.Sprintf("follows the live heap: at least %d MiB, else what is live, %d MiB or 1/%d of it more, and the runtime's own (%s)",
			followFloor>>20, followMinHeadroom>>20, followShare, l.From)
	}
	if l.Bytes == 0 {
		return "none (" + l.From + ")"
	}
	if l.GCPercent > 0 {
		return fmt.Sprintf("%d MiB (%s), GOGC=%d below it", l.Bytes>>20, l.From, l.GCPercent)
	}
	return fmt.Sprintf("%d MiB (%s)", l.Bytes>>20, l.From)
}

// Resolve decides the limit of s: getenv reads the environment and fs the
// process's cgroup.
func (s Spec) Resolve(getenv func(string) string, fs cgroups.FS) (Limit, error) {
	if !s.auto {
		if s.bytes == 0 {
			return Limit{From: "--memory-limit none"}, nil
		}
		l := Limit{Bytes: s.bytes, From: "--memory-limit"}
		if getenv("GOGC") == "" {
			l.GCPercent = gcPercentUnderLimit
		}
		return l, nil
	}
	switch v := getenv("GOMEMLIMIT"); v {
	case "":
	case "off":
		return Limit{From: "GOMEMLIMIT=off"}, nil
	default:
		// The runtime has read it already; report what it made of it.
		return Limit{Bytes: current(), From: "GOMEMLIMIT=" + v}, nil
	}
	cg, ok, err := fs.MemoryLimit("self")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return Limit{From: "no cgroup to read", Follow: true}, nil
		}
		return Limit{}, err
	}
	if !ok {
		return Limit{From: "no GOMEMLIMIT, no cgroup memory limit", Follow: true}, nil
	}
	return Limit{
		Bytes: int64(float64(cg) * cgroupShare),
		From:  fmt.Sprintf("90%% of the cgroup's memory limit, %d MiB", cg>>20),
	}, nil
}

// Apply sets the runtime's soft limit to l (none: no limit at all; or
// one that follows the live heap), and GOGC to l.GCPercent if set.
func Apply(l Limit) {
	stopFollowing()
	if l.GCPercent > 0 {
		debug.SetGCPercent(l.GCPercent)
	}
	if l.Follow {
		follow(followFloor)
		return
	}
	if l.Bytes == 0 {
		// Also what GOMEMLIMIT=off, or no GOMEMLIMIT, left in place.
		debug.SetMemoryLimit(math.MaxInt64)
		return
	}
	debug.SetMemoryLimit(l.Bytes)
}

// current is the runtime's soft limit, 0 for none.
func current() int64 {
	n := debug.SetMemoryLimit(-1)
	if n == math.MaxInt64 {
		return 0
	}
	return n
}
