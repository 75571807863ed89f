package endpoint

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/agent/endpoint/endpointtest"
)

func TestPortForward(t *testing.T) {
	port := strconv.Itoa(endpointtest.EchoPort(t))
	for _, h2 := range []bool{true, false} {
		t.Run(map[bool]string{true: "http2", false: "http1"}[h2], func(t *testing.T) {
			a := startAgent(t)
			a.rt.AddContainer("default", "web", "app", 0)
			hc := a.serverClient(h2)
			resp, conn := execReq(t, hc, a.url+"/portForward/default/web?address=127.0.0.1&port="+port, true)
			if resp.StatusCode != 200 {
				t.Fatalf("port forward: %d", resp.StatusCode)
			}
			br := bufio.NewReader(resp.Body)
			for _, line := range []string{"ping\n", "pong\n"} {
				if _, err := io.WriteString(conn, line); err != nil {
					t.Fatal(err)
				}
				if got, err := br.ReadString('\n'); err != nil || got != "echo: "+line {
					t.Fatalf("got %q, %v; want the pod's answer to %q", got, err, line)
				}
			}
			// The end of the caller's body half-closes the connection:
			// the pod still answers, then the reply ends.
			conn.Close()
			if rest, err := io.ReadAll(br); err != nil || string(rest) != "bye\n" {
				t.Fatalf("after the caller's end: %q, %v", rest, err)
			}

			code, body := do(t, hc, "POST", a.url+"/portForward/default/other?address=127.0.0.1&port="+port, nil)
			wantStatus(t, code, body, 404, "pod default/other has no running container on node edge-1")
			closed, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			closedPort := strconv.Itoa(closed.Addr().(*net.TCPAddr).Port)
			closed.Close()
			code, body = do(t, hc, "POST", a.url+"/portForward/default/web?address=127.0.0.1&port="+closedPort, nil)
			if code != 503 || !strings.Contains(body, "cannot connect to port "+closedPort+" of pod default/web at 127.0.0.1:"+closedPort) {
				t.Fatalf("a port nobody listens on: %d %s", code, body)
			}
			code, body = do(t, hc, "POST", a.url+"/portForward/default/web?address=web&port=80", nil)
			wantStatus(t, code, body, 400, `invalid value "web" for query parameter address: want the pod's IP address`)
			code, body = do(t, hc, "POST", a.url+"/portForward/default/web?address=127.0.0.1&port=0", nil)
			wantStatus(t, code, body, 400, `invalid value "0" for query parameter port: want a port number, 1 to 65535`)
			code, body = do(t, hc, "GET", a.url+"/portForward/default/web?address=127.0.0.1&port=80", nil)
			wantStatus(t, code, body, 405, "GET is not supported on /portForward/default/web; use POST")
		})
	}
}
