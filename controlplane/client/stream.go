package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/outpost-edge/outpost/agent/endpoint/wire"
	"github.com/outpost-edge/outpost/controlplane/api"
)

// Streams through a node's agent: a container's logs, a command run in
// it, an image archive loaded onto a node. Like watches, they are not
// bounded by the client's request timeout: a follow or an interactive
// exec lasts as long as ctx.

var (
	podsRes  = api.ResourceForKind("Pod")
	nodesRes = api.ResourceForKind("Node")
)

// PodLogOptions select the output PodLogs returns.
type PodLogOptions struct {
	// Container is the container's name; empty for the pod's only one.
	Container string
	// Follow keeps the stream open until the container exits.
	Follow bool
	// TailLines is how many of the last lines to start with; 0 or less
	// means all of them.
	TailLines  int
	Timestamps bool
	// Previous asks for the container's previous attempt.
	Previous bool
}

// PodLogs opens the output of a container of pod ns/name. The caller
// reads the stream and closes it; with Follow it ends when the container
// exits or ctx ends.
func (c *Client) PodLogs(ctx context.Context, ns, name string, opts PodLogOptions) (io.ReadCloser, error) {
	q := url.Values{}
	if opts.Container != "" {
		q.Set("container", opts.Container)
	}
	if opts.Follow {
		q.Set("follow", "true")
	}
	if opts.TailLines > 0 {
		q.Set("tailLines", strconv.Itoa(opts.TailLines))
	}
	if opts.Timestamps {
		q.Set("timestamps", "true")
	}
	if opts.Previous {
		q.Set("previous", "true")
	}
	resp, err := c.sendStream(ctx, http.MethodGet, PathFor(podsRes, ns, name, "log"), q, nil, 0, "")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// ExecOptions describe a command to run in a container.
type ExecOptions struct {
	// Container is the container's name; empty for the pod's only one.
	Container string
	Command   []string
	// Stdin, when set, is copied to the command's stdin until it ends;
	// nil runs the command without stdin.
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	TTY    bool
}

// Exec runs a command in a container of pod ns/name and returns its exit
// code once it ends. A command that could not be run at all (it does not
// exist in the image, the container stopped) is an error, as is a stream
// that broke before the exit code arrived (wire.ErrNoExitStatus).
func (c *Client) Exec(ctx context.Context, ns, name string, opts ExecOptions) (int, error) {
	q := url.Values{"command": opts.Command}
	if opts.Container != "" {
		q.Set("container", opts.Container)
	}
	if opts.Stdin != nil {
		q.Set("stdin", "true")
	}
	if opts.TTY {
		q.Set("tty", "true")
	}
	resp, err := c.sendStream(ctx, http.MethodPost, PathFor(podsRes, ns, name, "exec"), q, opts.Stdin, -1, "application/octet-stream")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	st, err := wire.ReadFrames(resp.Body, opts.Stdout, opts.Stderr)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return 0, fmt.Errorf("exec in pod %s/%s: %w", ns, name, ctxErr)
		}
		return 0, fmt.Errorf("exec in pod %s/%s: %w", ns, name, err)
	}
	if st.Error != "" {
		return 0, &ExecError{Message: st.Error}
	}
	return st.ExitCode, nil
}

// ExecError is a command the agent could not run.
type ExecError struct{ Message string }

func (e *ExecError) Error() string { return "cannot run the command: " + e.Message }

// ImportImages streams an image archive (an OCI or docker archive, a tar)
// to node's agent, which loads it into the node's container runtime, and
// returns the images it held. size is the archive's length, or -1 when
// unknown; the archive is read once, as it is sent.
func (c *Client) ImportImages(ctx context.Context, node string, archive io.Reader, size int64) ([]wire.Image, error) {
	path := "/apis/outpost.io/v1/" + nodesRes.Plural + "/" + url.PathEscape(node) + "/images"
	resp, err := c.sendStream(ctx, http.MethodPost, path, nil, archive, size, "application/x-tar")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list wire.ImageList
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&list); err != nil {
		return nil, fmt.Errorf("%w: image import on node %s: %w", ErrBadReply, node, err)
	}
	return list.Images, nil
}

// sendStream sends a request whose body (nil for none) is streamed, and
// returns a 2xx reply for the caller to read; other replies become
// *api.StatusError.
func (c *Client) sendStream(ctx context.Context, method, path string, query url.Values, body io.Reader, size int64, contentType string) (*http.Response, error) {
	resp, err := c.sendBody(ctx, method, path, query, body, size, contentType)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, ErrorFromReply(resp.StatusCode, data)
	}
	return resp, nil
}
