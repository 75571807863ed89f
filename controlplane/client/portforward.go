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
// or when ctx ends. The end of conn's reader half-closes the pod's
// connection, as a TCP client's shutdown does.
func (c *Client) PortForward(ctx context.Context, ns, name string, port int, conn io.ReadWriter) error {
	q := url.Values{"port": {strconv.Itoa(port)}}
	// Only conn's reader: the transport closes a request body that is a
	// Closer once it has read it, which would close conn before the
	// pod's answer to its end arrives.
	body := struct{ io.Reader }{conn}
	resp, err := c.sendStream(ctx, http.MethodPost, PathFor(podsRes, ns, name, "portforward"), q, body, -1, "application/octet-stream")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(conn, resp.Body); err != nil && ctx.Err() == nil {
		return fmt.Errorf("port forward to pod %s/%s port %d: %w", ns, name, port, err)
	}
	return nil
}
