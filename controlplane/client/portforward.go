package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// PortForward connects conn to port of pod ns/name through the API server
// and the pod's node agent: what conn's reader gives goes to the pod's
// port, what the pod sends back is written to conn. It returns when the
// pod's side ends (the connection is then done, as the pod closed it),
// when the server refuses the forward, or when ctx ends. The end of
// conn's reader half-closes the pod's connection, as a TCP client's
// shutdown does. A Read of conn may still be pending when it returns; it
// ends when the caller closes conn.
func (c *Client) PortForward(ctx context.Context, ns, name string, port int, conn io.ReadWriter) error {
	q := url.Values{"port": {strconv.Itoa(port)}}
	// conn's bytes reach the request through a pipe that the transport
	// may close without closing conn (it closes a body once it has read
	// it all, before the pod's answer to that end arrives) and that ends
	// a body Read blocked on a silent conn. HTTP/2's transport waits for
	// that Read before a refused request's response body closes: read
	// from conn itself, a refusal waited for the local client to give up.
	pr, pw := io.Pipe()
	defer pr.Close()
	go func() {
		_, err := io.Copy(pw, conn)
		pw.CloseWithError(err) // nil: EOF
	}()
	resp, err := c.sendStream(ctx, http.MethodPost, PathFor(podsRes, ns, name, "portforward"), q, pr, -1, "application/octet-stream")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(conn, resp.Body); err != nil && ctx.Err() == nil {
		return fmt.Errorf("port forward to pod %s/%s port %d: %w", ns, name, port, err)
	}
	return nil
}
