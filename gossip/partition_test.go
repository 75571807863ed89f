package gossip

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// cuttable drops everything a member sends and receives while cut, as a
// dead link does, without stopping the member.
type cuttable struct {
	memberlist.NodeAwareTransport
	cut     atomic.Bool
	packets chan *memberlist.Packet
	streams chan net.Conn
}

var errCut = errors.New("link cut by the test")

func newCuttable(t memberlist.NodeAwareTransport) *cuttable {
	c := &cuttable{NodeAwareTransport: t, packets: make(chan *memberlist.Packet), streams: make(chan net.Conn)}
	go func() {
		for p := range t.PacketCh() {
			if !c.cut.Load() {
				c.packets <- p
			}
		}
	}()
	go func() {
		for conn := range t.StreamCh() {
			if c.cut.Load() {
				conn.Close()
				continue
			}
			c.streams <- conn
		}
	}()
	return c
}

func (c *cuttable) PacketCh() <-chan *memberlist.Packet { return c.packets }
func (c *cuttable) StreamCh() <-chan net.Conn           { return c.streams }

func (c *cuttable) WriteTo(b []byte, addr string) (time.Time, error) {
	if c.cut.Load() {
		return time.Now(), nil // lost on the way, as UDP is
	}
	return c.NodeAwareTransport.WriteTo(b, addr)
}

func (c *cuttable) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if c.cut.Load() {
		return time.Now(), nil
	}
	return c.NodeAwareTransport.WriteToAddress(b, a)
}

func (c *cuttable) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if c.cut.Load() {
		return nil, errCut
	}
	return c.NodeAwareTransport.DialTimeout(addr, timeout)
}

func (c *cuttable) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if c.cut.Load() {
		return nil, errCut
	}
	return c.NodeAwareTransport.DialAddressTimeout(a, timeout)
}

// An agent cut off for longer than memberlist gossips to the dead: both
// sides declared each other dead and neither would talk to the other
// again. When the link comes back the agent's pool, seeing no live
// server, joins its seeds again, and both see each other alive.
func TestRejoinAfterLongCut(t *testing.T) {
	s1 := start(t, Config{Name: "s1", Timing: TimingFast})
	var link *cuttable
	a1 := start(t, Config{Name: "a1", Role: RoleAgent, Timing: TimingFast,
		wrapTransport: func(nt memberlist.NodeAwareTransport) memberlist.NodeAwareTransport {
			link = newCuttable(nt)
			return link
		}})
	type attempt struct {
		at time.Time
		n  int
	}
	attempts := make(chan attempt, 1024)
	a1.mu.Lock()
	a1.joinHook = func(n int, _ error) { attempts <- attempt{time.Now(), n} }
	a1.mu.Unlock()
	if err := a1.Join([]string{s1.LocalAddr()}); err != nil {
		t.Fatal(err)
	}
	waitMember(t, s1, "a1", StateAlive, 10*time.Second)
	waitMember(t, a1, "s1", StateAlive, 10*time.Second)

	// The first join reports after its members are alive (the join loop
	// runs on its own goroutine): wait for that report, so that it is
	// not taken for a join through the cut below.
	firstJoin := time.After(10 * time.Second)
	for joined := false; !joined; {
		select {
		case a := <-attempts:
			joined = a.n > 0
		case <-firstJoin:
			t.Fatal("the first join was never reported")
		}
	}
	link.cut.Store(true)
	waitMember(t, s1, "a1", StateDead, 10*time.Second)
	waitMember(t, a1, "s1", StateDead, 10*time.Second)
	dead := time.Now()
	// Keep the link down until the agent's join attempts have failed for
	// longer than the others gossip to the dead.
	limit := TimingFast.timings().gossipToTheDead
	deadline := time.After(30 * time.Second)
	for done := false; !done; {
		select {
		case a := <-attempts:
			if a.n > 0 {
				t.Fatal("a join succeeded through a cut link")
			}
			done = a.at.Sub(dead) > limit
		case <-deadline:
			t.Fatal("the agent made no join attempts while it saw no server")
		}
	}
	link.cut.Store(false)
	waitMember(t, s1, "a1", StateAlive, 10*time.Second)
	waitMember(t, a1, "s1", StateAlive, 10*time.Second)
	// The successful attempt is reported just after the join that made
	// the members alive again: wait for it (bounded), rather than look
	// once.
	rejoined := time.After(10 * time.Second)
	for joined := false; !joined; {
		select {
		case a := <-attempts:
			joined = a.n > 0
		case <-rejoined:
			t.Fatal("healed without a join: the cut was not long enough to test rejoining")
		}
	}
}
