package endpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/runtime"
)

// portForwardDialTimeout bounds connecting to a pod's port: a port
// nobody listens on answers at once, a dropped one must not hold the
// user's connection long.
const portForwardDialTimeout = 5 * time.Second

// servePortForward connects to port of the pod at address (the pod's
// IP from its status, which the API server read; the node's own address
// for pods on the host network) and copies the request body to the
// connection and the connection to the reply, full duplex, until both
// sides are done. The pod must have a running container on this node,
// so that a request cannot use the agent to reach anything else by
// naming another pod's node.
func (h *handler) servePortForward(w http.ResponseWriter, r *http.Request) {
	ns, pod := r.PathValue("ns"), r.PathValue("pod")
	q := r.URL.Query()
	addr, err := netip.ParseAddr(q.Get("address"))
	if err != nil {
		writeStatus(w, badRequest(fmt.Sprintf("invalid value %q for query parameter address: want the pod's IP address", q.Get("address"))))
		return
	}
	port, err := strconv.ParseUint(q.Get("port"), 10, 16)
	if err != nil || port == 0 {
		writeStatus(w, badRequest(fmt.Sprintf("invalid value %q for query parameter port: want a port number, 1 to 65535", q.Get("port"))))
		return
	}
	if err := h.podRunsHere(r.Context(), ns, pod); err != nil {
		h.fail(w, r, err)
		return
	}
	target := netip.AddrPortFrom(addr, uint16(port)).String()
	d := net.Dialer{Timeout: portForwardDialTimeout}
	conn, err := d.DialContext(r.Context(), "tcp", target)
	if err != nil {
		h.fail(w, r, statusError(http.StatusServiceUnavailable, api.ReasonServiceUnavailable,
			fmt.Sprintf("cannot connect to port %d of pod %s/%s at %s: %v", port, ns, pod, target, err)))
		return
	}
	defer conn.Close()
	rc := http.NewResponseController(w)
	_ = rc.EnableFullDuplex()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()

	// The caller's end of the stream: its writes go to the pod, and
	// the end of its body half-closes the connection, as the pod's own
	// end of output ends the reply.
	up := make(chan struct{})
	go func() {
		defer close(up)
		_, _ = io.Copy(conn, r.Body)
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
	}()
	fw := &flushWriter{w: w, rc: rc, started: true}
	if _, err := io.Copy(fw, conn); err != nil && r.Context().Err() == nil && !errors.Is(err, net.ErrClosed) {
		h.log.Info("port forward ended", "pod", ns+"/"+pod, "port", port, "err", err)
	}
	// The pod closed its side; the caller's may still be open, and
	// closing the connection ends the copy up.
	conn.Close()
	select {
	case <-up:
	case <-r.Context().Done():
	}
}

// podRunsHere checks a container of pod ns/name runs on this node.
func (h *handler) podRunsHere(ctx context.Context, ns, name string) error {
	all, err := h.rt.ListContainers(ctx)
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	for _, c := range all {
		if c.Labels[runtime.LabelPodNamespace] == ns && c.Labels[runtime.LabelPodName] == name && c.State == runtime.StateRunning {
			return nil
		}
	}
	return statusError(http.StatusNotFound, api.ReasonNotFound, fmt.Sprintf("pod %s/%s has no running container on node %s", ns, name, h.node))
}
