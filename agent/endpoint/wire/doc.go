// Package wire is the framing of the exec stream and the JSON bodies that
// the agent's endpoint, the API server and the client share. It is a leaf
// package (standard library only) so that the client can read an exec
// reply without depending on the agent.
//
// An exec reply body is a sequence of frames:
//
//	+--------+----------------------+-----------------+
//	| 1 byte | 4 bytes, big endian  | length bytes    |
//	| stream | length               | payload         |
//	+--------+----------------------+-----------------+
//
// Stream 1 is the command's stdout, 2 its stderr, 3 the exit status: a
// JSON ExitStatus, always the last frame. A payload is at most
// MaxFramePayload bytes. A body that ends without an exit frame means the
// agent or a proxy went away: the command's outcome is unknown.
//
// The request body of an exec is the command's stdin as plain bytes (not
// framed); its end closes the command's stdin. Kubernetes speaks SPDY or
// websockets here; outpost needs neither, because HTTP/2 (and HTTP/1.1
// with full-duplex handlers) carry a request body and a reply body at the
// same time.
package wire
