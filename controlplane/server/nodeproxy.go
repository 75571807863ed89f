package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/pki"
)

// Streams through the node agents: `outpost logs`, `outpost exec`,
// `outpost port-forward` and `outpost image import`. The server authorizes the user, reads the pod
// and its node from its own store (any server can, so nothing is
// forwarded to the leader), dials the node's agent endpoint with its own
// server certificate, checks that the agent's certificate names the node,
// and copies both directions as they flow, never holding a whole body.
//
//	GET  /api/v1/namespaces/NS/pods/NAME/log?container=&follow=&tailLines=&timestamps=&previous=
//	POST /api/v1/namespaces/NS/pods/NAME/exec?container=&command=...&stdin=&tty=
//	     (reply: the framed stream of package agent/endpoint/wire)
//	POST /api/v1/namespaces/NS/pods/NAME/portforward?port=P
//	     (full duplex: the body goes to the pod's port, the reply is what
//	     it sends back)
//	POST /apis/outpost.io/v1/nodes/NAME/images   (body: an image archive)

// Subresources served through the agent.
const (
	subLog    = auth.SubresourceLog
	subExec   = auth.SubresourceExec
	subImages = auth.SubresourceImages
)

// agentDialTimeout bounds reaching an agent; a node that is down must not
// hold a user's command for long.
const agentDialTimeout = 5 * time.Second

// streamReadWait bounds the wait for the latest state before a stream
// settles for this server's own copy of the pod.
const streamReadWait = 2 * time.Second

// agentCertTTL is the life of the client certificate an insecure server
// (which has no serving certificate) issues itself for one agent call.
const agentCertTTL = time.Hour

// serveNodeStream serves the routes above and reports whether segs (what
// follows /api/v1 or /apis/GROUP/VERSION) named one of them.
func (s *Server) serveNodeStream(w *recorder, r *http.Request, id *auth.Identity, group string, segs []string) bool {
	switch {
	case group == "" && len(segs) == 5 && segs[0] == "namespaces" && segs[2] == "pods" && segs[4] == subLog:
		w.label(verbGet, "pods/"+subLog)
		s.servePodLog(w, r, id, segs[1], segs[3])
	case group == "" && len(segs) == 5 && segs[0] == "namespaces" && segs[2] == "pods" && segs[4] == subExec:
		w.label(verbCreate, "pods/"+subExec)
		s.servePodExec(w, r, id, segs[1], segs[3])
	case group == "" && len(segs) == 5 && segs[0] == "namespaces" && segs[2] == "pods" && segs[4] == auth.SubresourcePortForward:
		w.label(verbCreate, "pods/"+auth.SubresourcePortForward)
		s.servePodPortForward(w, r, id, segs[1], segs[3])
	case group == "" && len(segs) == 4 && segs[0] == "nodes" && segs[2] == subProxy && segs[3] == "metrics":
		w.label(verbGet, "nodes/"+subProxy)
		s.serveNodeAgentMetrics(w, r, id, segs[1])
	case group == raftGroup && len(segs) == 3 && segs[0] == "nodes" && segs[2] == subHeartbeat:
		w.label(verbCreate, "nodes/"+subHeartbeat)
		s.serveNodeHeartbeat(w, r, id, segs[1])
	case group == raftGroup && len(segs) == 3 && segs[0] == "nodes" && segs[2] == subImages:
		w.label(verbCreate, "nodes/"+subImages)
		s.serveNodeImages(w, r, id, segs[1])
	default:
		return false
	}
	return true
}

// checkBool validates an optional boolean query parameter.
func checkBool(q url.Values, name string) error {
	if v := q.Get(name); v != "" {
		if _, err := strconv.ParseBool(v); err != nil {
			return api.NewBadRequest(fmt.Sprintf("invalid value %q for query parameter %s: want true or false", v, name))
		}
	}
	return nil
}

func (s *Server) servePodLog(w *recorder, r *http.Request, id *auth.Identity, ns, name string) {
	if r.Method != http.MethodGet {
		writeError(w, api.NewMethodNotAllowed(r.Method+" is not supported on pods "+name+"/"+subLog))
		return
	}
	if err := s.authorize(id, auth.Request{Verb: auth.VerbGet, Resource: "pods", Subresource: subLog, Namespace: ns, Name: name}); err != nil {
		writeError(w, err)
		return
	}
	q := r.URL.Query()
	out := url.Values{}
	for _, p := range []string{"follow", "timestamps", "previous"} {
		if err := checkBool(q, p); err != nil {
			writeError(w, err)
			return
		}
		if v := q.Get(p); v != "" {
			out.Set(p, v)
		}
	}
	if v := q.Get("tailLines"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, api.NewBadRequest(fmt.Sprintf("invalid value %q for query parameter tailLines: want a whole number of lines, 1 or more", v)))
			return
		}
		out.Set("tailLines", v)
	}
	pod, container, err := s.podContainer(r.Context(), ns, name, q.Get("container"))
	if err != nil {
		writeError(w, err)
		return
	}
	s.toAgent(w, r, pod.Spec.NodeName, http.MethodGet, "/containerLogs/"+pathJoin(ns, name, container), out, nil)
}

func (s *Server) servePodExec(w *recorder, r *http.Request, id *auth.Identity, ns, name string) {
	if r.Method != http.MethodPost {
		writeError(w, api.NewMethodNotAllowed(r.Method+" is not supported on pods "+name+"/"+subExec+"; use POST"))
		return
	}
	if err := s.authorize(id, auth.Request{Verb: auth.VerbCreate, Resource: "pods", Subresource: subExec, Namespace: ns, Name: name}); err != nil {
		writeError(w, err)
		return
	}
	q := r.URL.Query()
	cmd := q["command"]
	if len(cmd) == 0 || cmd[0] == "" {
		writeError(w, api.NewBadRequest("you must specify at least one command for the container"))
		return
	}
	for _, p := range []string{"stdin", "tty"} {
		if err := checkBool(q, p); err != nil {
			writeError(w, err)
			return
		}
	}
	pod, container, err := s.podContainer(r.Context(), ns, name, q.Get("container"))
	if err != nil {
		writeError(w, err)
		return
	}
	out := url.Values{"command": cmd}
	var body io.Reader
	if stdin, _ := strconv.ParseBool(q.Get("stdin")); stdin {
		out.Set("stdin", "true")
		body = r.Body
	}
	if tty, _ := strconv.ParseBool(q.Get("tty")); tty {
		out.Set("tty", "true")
	}
	// Over HTTP/1.1 the reply starts while stdin still flows in.
	_ = http.NewResponseController(w).EnableFullDuplex()
	s.toAgent(w, r, pod.Spec.NodeName, http.MethodPost, "/exec/"+pathJoin(ns, name, container), out, body)
}

func (s *Server) serveNodeImages(w *recorder, r *http.Request, id *auth.Identity, node string) {
	if r.Method != http.MethodPost {
		writeError(w, api.NewMethodNotAllowed(r.Method+" is not supported on nodes "+node+"/"+subImages+"; use POST"))
		return
	}
	if err := s.authorize(id, auth.Request{Verb: auth.VerbCreate, Resource: "nodes", Subresource: subImages, Name: node}); err != nil {
		writeError(w, err)
		return
	}
	if _, err := s.core.GetObject(nodesResource, "", node); err != nil {
		writeError(w, err)
		return
	}
	s.toAgent(w, r, node, http.MethodPost, "/images", nil, r.Body)
}

func pathJoin(parts ...string) string {
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

// podContainer reads the pod, preferring the latest state but settling
// for the local copy when there is no quorum (logs matter most when the
// cluster is in trouble), and picks the container: the one named, or the
// pod's only one.
func (s *Server) podContainer(ctx context.Context, ns, name, container string) (*api.Pod, string, error) {
	pod, err := s.streamPod(ctx, ns, name)
	if err != nil {
		return nil, "", err
	}
	var names []string
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	switch {
	case container != "":
		if !slices.Contains(names, container) {
			return nil, "", api.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", container, name))
		}
	case len(pod.Spec.Containers) == 1:
		container = pod.Spec.Containers[0].Name
	default:
		return nil, "", api.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: [%s]", name, strings.Join(names, " ")))
	}
	if pod.Spec.NodeName == "" {
		return nil, "", api.NewBadRequest(fmt.Sprintf("pod %s/%s is not bound to a node yet: it has no containers to reach", ns, name))
	}
	if msg := waitingToStart(pod, container); msg != "" {
		return nil, "", api.NewBadRequest(msg)
	}
	return pod, container, nil
}

// streamPod reads the pod a stream goes to, preferring the latest state
// but settling for the local copy when there is no quorum.
func (s *Server) streamPod(ctx context.Context, ns, name string) (*api.Pod, error) {
	rctx, cancel := context.WithTimeout(ctx, streamReadWait)
	err := s.consistentRead(rctx)
	cancel()
	if err != nil {
		s.log.Debug("reading a pod for a stream from the local store", "pod", ns+"/"+name, "err", err)
	}
	obj, err := s.core.GetObject(podsResource, ns, name)
	if err != nil {
		return nil, err
	}
	pod, ok := obj.(*api.Pod)
	if !ok {
		return nil, fmt.Errorf("pod %s/%s is stored as %T", ns, name, obj)
	}
	return pod, nil
}

// waitingToStart says, as kubectl does, that a container the node never
// started (its status waiting, with no container ID) has nothing to
// show; "" otherwise, and the agent is asked.
func waitingToStart(pod *api.Pod, container string) string {
	for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		if cs.Name != container || cs.ContainerID != "" || cs.State.Waiting == nil {
			continue
		}
		msg := fmt.Sprintf("container %q in pod %q is waiting to start: %s", container, pod.Name, cs.State.Waiting.Reason)
		if cs.State.Waiting.Message != "" {
			msg += ": " + cs.State.Waiting.Message
		}
		return msg
	}
	return ""
}

// agentAddr finds where node's agent listens, from the Node's status.
func (s *Server) agentAddr(node string) (string, error) {
	obj, err := s.core.GetObject(nodesResource, "", node)
	if err != nil {
		if api.IsNotFound(err) {
			return "", unavailable(fmt.Sprintf("node %s is not registered: its agent cannot be reached", node), 5)
		}
		return "", err
	}
	n, ok := obj.(*api.Node)
	if !ok {
		return "", fmt.Errorf("node %s is stored as %T", node, obj)
	}
	port := n.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port <= 0 {
		return "", unavailable(fmt.Sprintf("node %s reports no agent endpoint (status.daemonEndpoints.kubeletEndpoint.Port is unset)", node), 5)
	}
	host := ""
	for _, typ := range []string{"InternalIP", "Hostname"} {
		for _, a := range n.Status.Addresses {
			if a.Type == typ && a.Address != "" && host == "" {
				host = a.Address
			}
		}
	}
	if host == "" {
		return "", unavailable(fmt.Sprintf("node %s reports no InternalIP or Hostname address to reach its agent at", node), 5)
	}
	return net.JoinHostPort(host, strconv.Itoa(int(port))), nil
}

// agentTLS is the TLS configuration for calling node's agent: this
// server's certificate (an insecure server issues itself a client
// certificate), and an agent certificate of the cluster CA that names
// node and carries pki.NodeOU.
func (s *Server) agentTLS(node string) (*tls.Config, error) {
	var cert tls.Certificate
	if s.httpSrv.TLSConfig != nil && len(s.httpSrv.TLSConfig.Certificates) > 0 {
		cert = s.httpSrv.TLSConfig.Certificates[0]
	} else {
		var err error
		if cert, err = s.ca.IssueClientCert(s.cfg.ID, pki.ServerOU, agentCertTTL); err != nil {
			return nil, fmt.Errorf("client certificate for agents: %w", err)
		}
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		RootCAs:      s.ca.Pool(),
		ServerName:   node,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyAgent(cs.PeerCertificates, node)
		},
	}, nil
}

// verifyAgent runs after the chain was verified against the CA and the
// name node against the certificate's names.
func verifyAgent(chain []*x509.Certificate, node string) error {
	if len(chain) == 0 {
		return errors.New("the agent presented no certificate")
	}
	leaf := chain[0]
	if leaf.Subject.CommonName != node || !slices.Contains(leaf.Subject.OrganizationalUnit, pki.NodeOU) {
		return fmt.Errorf("the agent's certificate is for %q (units %v), not node %q", leaf.Subject.CommonName, leaf.Subject.OrganizationalUnit, node)
	}
	return nil
}

// agentRequest sends one request to node's agent and returns its reply
// (the caller closes its body); prepare, when set, adjusts the request
// before it goes. An agent that cannot be reached is a 503 to pass on;
// ctx ending is ctx's error.
func (s *Server) agentRequest(ctx context.Context, node, method, path string, query url.Values, body io.Reader, prepare func(*http.Request)) (*http.Response, error) {
	addr, err := s.agentAddr(node)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := s.agentTLS(node)
	if err != nil {
		return nil, err
	}
	// One transport per request: streams are few and long, each needs
	// its own server name, and nothing is left idle when it ends.
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: agentDialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tlsCfg,
		ForceAttemptHTTP2:   true,
		DisableKeepAlives:   true,
		TLSHandshakeTimeout: agentDialTimeout,
	}
	u := url.URL{Scheme: "https", Host: addr, Path: path, RawQuery: query.Encode()}
	if body == nil {
		body = http.NoBody
	}
	out, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("request to the agent of node %s: %w", node, err)
	}
	if prepare != nil {
		prepare(out)
	}
	resp, err := tr.RoundTrip(out)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		s.log.Warn("cannot reach a node's agent", "node", node, "addr", addr, "err", err)
		return nil, unavailable(fmt.Sprintf("cannot reach the agent of node %s at %s: %v", node, addr, err), 5)
	}
	return resp, nil
}

// toAgent sends one request to node's agent and copies the reply to w as
// it arrives, flushing after every read so that a follow or an exec is
// seen live. The caller going away cancels the agent's request.
func (s *Server) toAgent(w *recorder, r *http.Request, node, method, path string, query url.Values, body io.Reader) {
	resp, err := s.agentRequest(r.Context(), node, method, path, query, body, func(out *http.Request) {
		if body != r.Body {
			return
		}
		out.ContentLength = r.ContentLength
		if out.ContentLength == 0 {
			out.ContentLength = -1
		}
		if ct := r.Header.Get("Content-Type"); ct != "" {
			out.Header.Set("Content-Type", ct)
		}
	})
	if err != nil {
		if r.Context().Err() == nil {
			writeError(w, err)
		}
		return
	}
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", "Content-Length", "X-Content-Type-Options"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return // the caller went away; the deferred close ends the agent's side
			}
			_ = rc.Flush()
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) && r.Context().Err() == nil {
				s.log.Warn("stream from a node's agent broke", "node", node, "path", path, "err", rerr)
			}
			return
		}
	}
}
