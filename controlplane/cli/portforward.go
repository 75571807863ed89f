package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// forwardedPort is one [LOCAL:]REMOTE argument; local 0 is any free port.
type forwardedPort struct{ local, remote int }

func parseForwardedPort(s string) (forwardedPort, error) {
	local, remote, hasLocal := strings.Cut(s, ":")
	if !hasLocal {
		remote = local
	}
	port := func(v string, zeroOK bool) (int, error) {
		if v == "" && zeroOK {
			return 0, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 65535 || (n == 0 && !zeroOK) {
			return 0, usagef("invalid port %q in %q: want [LOCAL_PORT:]REMOTE_PORT, ports 1 to 65535 (LOCAL_PORT empty or 0: any free port)", v, s)
		}
		return n, nil
	}
	var fp forwardedPort
	var err error
	if fp.local, err = port(local, hasLocal); err != nil {
		return fp, err
	}
	fp.remote, err = port(remote, false)
	return fp, err
}

func newPortForwardCommand(o *options) *cobra.Command {
	var addresses []string
	cmd := &cobra.Command{
		Use:   "port-forward POD|pod/NAME [LOCAL_PORT:]REMOTE_PORT...",
		Short: "Forward local ports to a pod's ports",
		Long: "port-forward listens on local ports and connects every connection to a port of the\n" +
			"pod, through the API server and the agent of the pod's node (as logs and exec go),\n" +
			"until interrupted. LOCAL_PORT empty or 0 picks a free port; without LOCAL_PORT the\n" +
			"same number is used locally. A workload (deployment/NAME, daemonset/NAME) means one of\n" +
			"its pods; services are not forwarded to.",
		Example: `  outpost port-forward web-6d4b9-x2x7q 8080:80
  outpost port-forward pod/db-0 5432 -n shop
  outpost port-forward web-6d4b9-x2x7q :80 --address 0.0.0.0`,
		Args: minArgs(2, "a pod and at least one [LOCAL_PORT:]REMOTE_PORT, e.g. `outpost port-forward web-1 8080:80`"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var ports []forwardedPort
			for _, a := range args[1:] {
				fp, err := parseForwardedPort(a)
				if err != nil {
					return err
				}
				ports = append(ports, fp)
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			ns := cl.Namespace()
			name, err := podTarget(ctx, cl, args[0], cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			// Refuse at once what every connection would be refused for.
			obj, err := cl.Get(ctx, podResource, ns, name, client.GetOptions{})
			if err != nil {
				return err
			}
			if p := obj.(*api.Pod); p.Status.Phase != api.PodRunning {
				return fmt.Errorf("unable to forward port because pod is not running. Current status=%s", p.Status.Phase)
			}
			var listeners []net.Listener
			defer func() {
				for _, ln := range listeners {
					ln.Close()
				}
			}()
			out := &lockedWriter{w: cmd.OutOrStdout()}
			errOut := &lockedWriter{w: cmd.ErrOrStderr()}
			for _, fp := range ports {
				for _, addr := range addresses {
					ln, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(fp.local)))
					if err != nil {
						return fmt.Errorf("unable to listen on port %d: %w", fp.local, err)
					}
					listeners = append(listeners, ln)
					fmt.Fprintf(out, "Forwarding from %s -> %d\n", ln.Addr(), fp.remote)
				}
			}
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			var wg sync.WaitGroup
			i := 0
			for _, fp := range ports {
				for range addresses {
					ln := listeners[i]
					i++
					wg.Go(func() { forwardConnections(ctx, cl, ns, name, fp.remote, ln, out, errOut) })
				}
			}
			<-ctx.Done()
			for _, ln := range listeners {
				ln.Close()
			}
			wg.Wait()
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&addresses, "address", []string{"127.0.0.1"}, "local addresses to listen on (comma-separated)")
	return cmd
}

// forwardConnections accepts connections on ln until it is closed and
// connects each to port of the pod; the connections end with ctx.
func forwardConnections(ctx context.Context, cl *client.Client, ns, name string, port int, ln net.Listener, out, errOut io.Writer) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			return // closed: the command is ending
		}
		local := ln.Addr().(*net.TCPAddr).Port
		fmt.Fprintf(out, "Handling connection for %d\n", local)
		wg.Go(func() {
			stop := context.AfterFunc(ctx, func() { conn.Close() })
			defer stop()
			defer conn.Close()
			if err := cl.PortForward(ctx, ns, name, port, conn); err != nil && ctx.Err() == nil {
				fmt.Fprintf(errOut, "error forwarding port %d to pod %s: %s\n", port, name, FormatError(err))
			}
		})
	}
}
