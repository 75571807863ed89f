package portcheck

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
)

// A taken TCP or UDP address is refused naming its flag, what it is for,
// and this test's own process as the holder; free ones pass (issue 15
// item 7: a busy agent port is said at once, not after a minute).
func TestCheck(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	u, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freeAddr := free.Addr().String()
	free.Close()

	if err := Check([]Use{{Network: "tcp", Addr: freeAddr, Flag: "--x", What: "x"}, {Network: "tcp", Addr: "127.0.0.1:0", Flag: "--y", What: "y"}}); err != nil {
		t.Fatalf("free addresses: %v", err)
	}
	err = Check([]Use{
		{Network: "tcp", Addr: l.Addr().String(), Flag: "--agent-listen", What: "the agent's endpoint"},
		{Network: "tcp", Addr: freeAddr, Flag: "--api-addr", What: "the API"},
		{Network: "udp", Addr: u.LocalAddr().String(), Flag: "--agent-gossip-port", What: "gossip"},
	})
	if err == nil {
		t.Fatal("busy addresses passed")
	}
	me := fmt.Sprintf("pid %d (", os.Getpid())
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 {
		t.Fatalf("want one line per busy address, got %q", err)
	}
	for i, want := range []string{"tcp " + l.Addr().String() + " (--agent-listen, the agent's endpoint) is in use by " + me,
		"udp " + u.LocalAddr().String() + " (--agent-gossip-port, gossip) is in use by " + me} {
		if !strings.HasPrefix(lines[i], want) || !strings.HasSuffix(lines[i], "address already in use") {
			t.Errorf("line %d = %q, want it to start %q and end with the kernel's reason", i, lines[i], want)
		}
	}
}

// A wildcard listener clashes with a loopback address of its port, and
// the other way round.
func TestHolderWildcard(t *testing.T) {
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	me := fmt.Sprintf("pid %d (", os.Getpid())
	for _, addr := range []string{"127.0.0.1:" + port, ":" + port, "0.0.0.0:" + port} {
		if got := Holder("tcp", addr); !strings.HasPrefix(got, me) {
			t.Errorf("Holder(%s) = %q, want %s...", addr, got, me)
		}
	}
	if got := Holder("tcp", "not an address"); got != "" {
		t.Errorf("Holder of garbage = %q", got)
	}
}

func TestParseHexAddrPort(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F:2802":                         "127.0.0.1:10242",
		"00000000:1F90":                         "0.0.0.0:8080",
		"00000000000000000000000001000000:0050": "[::1]:80",
	} {
		got, ok := parseHexAddrPort(in)
		if !ok || got.String() != want {
			t.Errorf("%s = %v %v, want %s", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "zz:10", "0100007F", "0100007F:xyz", "01:10"} {
		if _, ok := parseHexAddrPort(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}
