package gossip

import (
	"time"

	"github.com/hashicorp/memberlist"
)

// Timing is a preset of the pool's failure-detection and join timings.
type Timing int

// Timing presets.
const (
	// TimingDefault is for real clusters. A member that goes silent is
	// declared dead by the others in about 3–4 s on a cluster of fewer
	// than ten members (see timings for the arithmetic), about 5 s at
	// 100 and 7 s at 1000.
	TimingDefault Timing = iota
	// TimingFast is five times faster, for tests on loopback: about 1 s
	// to declare a silent member dead. On a loaded machine it declares
	// live members dead now and then (they refute and come back).
	TimingFast
)

// timings are a preset's numbers.
type timings struct {
	probeInterval, probeTimeout time.Duration
	suspicionMult               int
	gossipInterval              time.Duration
	pushPullInterval            time.Duration
	gossipToTheDead             time.Duration
	tcpTimeout                  time.Duration
	deadNodeReclaim             time.Duration
	// joinRetryMin and joinRetryMax bound the back-off of join attempts
	// while no seed answers.
	joinRetryMin, joinRetryMax time.Duration
	// rejoinCheck is how often a joined pool checks that it still sees
	// a server; one that sees none joins its seeds again.
	rejoinCheck time.Duration
}

// timings returns the numbers of t.
//
// Why the default numbers (memberlist's SWIM with Lifeguard): every member
// probes one other member per ProbeInterval (1 s), in a shuffled
// round-robin, so on a small cluster someone probes a silent member within
// about a second. A probe fails after ProbeTimeout (500 ms: an edge link's
// round trip, with room for a busy host) plus the indirect probes through
// other members and a TCP fallback until the interval ends (1 s in all).
// The prober then suspects the member and gossips that; the suspicion ends
// in death after SuspicionMult × max(1, log10 n) × ProbeInterval, 2 s for
// n < 10. With SuspicionMult 2 memberlist expects no confirmations
// (k = SuspicionMult − 2 = 0), so that timeout is fixed rather than
// starting at SuspicionMaxTimeoutMult times it and shrinking as other
// members confirm; the price is one member's opinion suffices, which the
// 2 s window lets a live member refute. The death is gossiped every
// GossipInterval (100 ms) to 3 members, so everyone knows within a few
// hundred milliseconds. Total: about 1 + 1 + 2 + 0.3 ≈ 3–4 s, well under
// the 10 s target, and the control plane adds nothing but a write.
// AwarenessMaxMultiplier 3 (memberlist: 8) caps how far a member that
// thinks itself unhealthy (missed acks on a loaded host) stretches its
// probe interval, so a loaded server still detects within about 10 s.
func (t Timing) timings() timings {
	if t == TimingFast {
		return timings{
			probeInterval:    200 * time.Millisecond,
			probeTimeout:     100 * time.Millisecond,
			suspicionMult:    2,
			gossipInterval:   50 * time.Millisecond,
			pushPullInterval: 2 * time.Second,
			gossipToTheDead:  3 * time.Second,
			tcpTimeout:       time.Second,
			deadNodeReclaim:  2 * time.Second,
			joinRetryMin:     100 * time.Millisecond,
			joinRetryMax:     time.Second,
			rejoinCheck:      500 * time.Millisecond,
		}
	}
	return timings{
		probeInterval:    time.Second,
		probeTimeout:     500 * time.Millisecond,
		suspicionMult:    2,
		gossipInterval:   100 * time.Millisecond,
		pushPullInterval: 15 * time.Second,
		gossipToTheDead:  15 * time.Second,
		tcpTimeout:       5 * time.Second,
		// An agent whose address changed (DHCP at the edge) may take its
		// name back this long after it was declared dead.
		deadNodeReclaim: 10 * time.Second,
		joinRetryMin:    time.Second,
		joinRetryMax:    30 * time.Second,
		rejoinCheck:     5 * time.Second,
	}
}

// apply sets t's numbers on a memberlist config.
func (t timings) apply(c *memberlist.Config) {
	c.ProbeInterval = t.probeInterval
	c.ProbeTimeout = t.probeTimeout
	c.SuspicionMult = t.suspicionMult
	c.SuspicionMaxTimeoutMult = 2
	c.AwarenessMaxMultiplier = 3
	c.GossipInterval = t.gossipInterval
	c.GossipNodes = 3
	c.PushPullInterval = t.pushPullInterval
	c.GossipToTheDeadTime = t.gossipToTheDead
	c.TCPTimeout = t.tcpTimeout
	c.DeadNodeReclaimTime = t.deadNodeReclaim
}
