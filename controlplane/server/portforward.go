package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
)

// servePodPortForward connects the caller to a port of a pod through the
// agent of its node, which dials the pod's address from its status (the
// node's own for pods on the host network): `outpost port-forward`.
func (s *Server) servePodPortForward(w *recorder, r *http.Request, id *auth.Identity, ns, name string) {
	if r.Method != http.MethodPost {
		writeError(w, api.NewMethodNotAllowed(r.Method+" is not supported on pods "+name+"/"+auth.SubresourcePortForward+"; use POST"))
		return
	}
	if err := s.authorize(id, auth.Request{Verb: auth.VerbCreate, Resource: "pods", Subresource: auth.SubresourcePortForward, Namespace: ns, Name: name}); err != nil {
		writeError(w, err)
		return
	}
	port, err := strconv.ParseUint(r.URL.Query().Get("port"), 10, 16)
	if err != nil || port == 0 {
		writeError(w, api.NewBadRequest(fmt.Sprintf("invalid value %q for query parameter port: want a port number, 1 to 65535", r.URL.Query().Get("port"))))
		return
	}
	pod, err := s.streamPod(r.Context(), ns, name)
	if err != nil {
		writeError(w, err)
		return
	}
	switch {
	case pod.Spec.NodeName == "":
		writeError(w, api.NewBadRequest(fmt.Sprintf("pod %s/%s is not bound to a node yet: it has no port to reach", ns, name)))
		return
	case pod.Status.Phase != api.PodRunning || pod.Status.PodIP == "":
		writeError(w, api.NewBadRequest(fmt.Sprintf("unable to forward port because pod is not running. Current status=%s", pod.Status.Phase)))
		return
	}
	// Over HTTP/1.1 the reply starts while the caller's bytes still flow in.
	_ = http.NewResponseController(w).EnableFullDuplex()
	q := url.Values{"address": {pod.Status.PodIP}, "port": {strconv.FormatUint(port, 10)}}
	s.toAgent(w, r, pod.Spec.NodeName, http.MethodPost, "/portForward/"+pathJoin(ns, name), q, r.Body)
}
