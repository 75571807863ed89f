// Package endpoint is the node agent's HTTPS endpoint, through which the
// control plane reads a container's logs, runs a command in it, forwards
// a connection to a pod's port, loads image archives onto the node and
// reads the node's resource use (Kubernetes' kubelet API in spirit, not
// in wire format). Users never call it: the API server does, for
// `outpost logs`, `outpost exec`, `outpost port-forward`, `outpost image
// import` and `outpost top`, after it has authorized the user and found
// the pod's node.
//
// Trust: the agent serves with its node certificate (cluster CA, common
// name the node's name, organizational unit pki.NodeOU) and requires a
// client certificate of the cluster CA with organizational unit
// pki.ServerOU (TLSConfig), so only control-plane servers get in; users'
// and other nodes' certificates are refused in the handshake. The
// handler itself does no authorization: the API server did it.
//
// Routes (errors are Kubernetes Status JSON):
//
//	GET  /containerLogs/{ns}/{pod}/{container}?follow=&tailLines=&timestamps=&previous=
//	     the container's output as text/plain, flushed as it is written;
//	     with follow=true the stream lasts until the container exits or
//	     the caller goes away.
//	POST /exec/{ns}/{pod}/{container}?command=a&command=b&stdin=true&tty=false
//	     full duplex: the request body is the command's stdin, the reply
//	     body the framed stdout, stderr and exit status of package wire.
//	POST /images
//	     the body is an OCI or docker archive (a tar), streamed into the
//	     runtime; the reply is a wire.ImageList.
//	POST /portForward/{ns}/{pod}?address=IP&port=P
//	     full duplex: a TCP connection to port P of the pod at IP (its
//	     address from its status, given by the API server), which must
//	     have a running container on this node; the request body goes
//	     to the connection, the connection's output is the reply body.
//	GET  /stats/summary
//	     the latest usage readings of the node and its running
//	     containers (wire.Summary), for metrics.k8s.io (`outpost top`).
//	GET  /metrics
//	     the agent's Prometheus metrics: its pods' and containers' use
//	     and restarts, and its own health.
//	GET  /healthz
//
// The agent wires it as
//
//	h := endpoint.New(endpoint.Config{Runtime: rt, Logger: log, NodeName: name})
//	err := endpoint.Serve(ctx, ln, endpoint.TLSConfig(caPool, nodeCert), h, log)
//
// and reports ln's port in its Node's status.daemonEndpoints (the API
// server dials the node's InternalIP, else its Hostname, at that port and
// checks that the certificate's common name is the node's name).
//
// A logs request without follow sends its header with the first output,
// so a runtime error before any output is still a Status; with follow the
// header goes at once. An exec's errors after its header (the command
// does not exist, the container stopped meanwhile) travel in the exit
// frame. tailLines=0 is refused: the runtime's 0 means "all lines".
//
// The container for (ns, pod, container) is found among the runtime's
// containers by their outpost labels; the highest attempt is the current
// one, previous=true selects the one before it.
package endpoint
