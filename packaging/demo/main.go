// Command demo is the workload of `make run`'s demo: a static binary the
// repository builds and packs into an image itself, since there is no
// registry to pull from. "tick" logs a line every few seconds (the
// deployment), "serve" answers HTTP with its host name and the caller's
// address (the daemon set, behind a Service and a host port), and "echo"
// prints its arguments: the image holds no shell, so this is what
// `outpost exec` can run in it; "get URL" prints what an HTTP GET of URL
// answers (a pod reaching another, or a Service, by address or name),
// once or, with -every, again and again (the caller). "tick -on-term
// ignore" goes on ticking after SIGTERM, as a program slow to shut down
// would, so that its node has to kill it when the grace period ends.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: demo tick [-every 5s] | serve [-port 8088] | echo WORDS... | get [-every 5s] URL")
		os.Exit(2)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	host, _ := os.Hostname()
	// Pods share the host's network, so the host name is the node's; a
	// POD_NAME in the pod's env says which pod this is.
	who := "a pod"
	if p := os.Getenv("POD_NAME"); p != "" {
		who = "pod " + p
	}
	switch os.Args[1] {
	case "tick":
		fs := flag.NewFlagSet("tick", flag.ExitOnError)
		every := fs.Duration("every", 5*time.Second, "interval")
		onTerm := fs.String("on-term", "exit", "what SIGTERM does: exit, or ignore")
		_ = fs.Parse(os.Args[2:])
		t := time.NewTicker(*every)
		n := 0
		for {
			n++
			fmt.Printf("tick %d from %s on %s\n", n, who, host)
			select {
			case <-t.C:
			case <-stop:
				if *onTerm == "ignore" {
					fmt.Println("SIGTERM: ignored")
					continue
				}
				fmt.Println("SIGTERM: bye")
				return
			}
		}
	case "serve":
		fs := flag.NewFlagSet("serve", flag.ExitOnError)
		port := fs.Int("port", 8088, "port")
		_ = fs.Parse(os.Args[2:])
		http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			// The caller's address as this pod sees it: a pod's own
			// when pods reach pods without NAT.
			from, _, _ := net.SplitHostPort(r.RemoteAddr)
			fmt.Fprintf(w, "hello from %s on %s, to %s\n", who, host, from)
		})
		srv := &http.Server{Addr: fmt.Sprintf(":%d", *port), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			<-stop
			_ = srv.Close()
		}()
		fmt.Printf("serving on :%d\n", *port)
		if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "echo":
		fmt.Println(strings.Join(os.Args[2:], " "))
	case "get":
		fs := flag.NewFlagSet("get", flag.ExitOnError)
		every := fs.Duration("every", 0, "ask again at this interval until stopped (0: once, exiting 1 when it fails)")
		_ = fs.Parse(os.Args[2:])
		if fs.NArg() != 1 {
			fmt.Fprintln(os.Stderr, "usage: demo get [-every 5s] URL")
			os.Exit(2)
		}
		cl := &http.Client{Timeout: 5 * time.Second}
		get := func() error {
			resp, err := cl.Get(fs.Arg(0))
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			_, err = io.Copy(os.Stdout, resp.Body)
			return err
		}
		if *every <= 0 {
			if err := get(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			return
		}
		t := time.NewTicker(*every)
		for {
			if err := get(); err != nil {
				fmt.Println(err)
			}
			select {
			case <-t.C:
			case <-stop:
				return
			}
		}
	default:
		fmt.Fprintf(os.Stderr, "demo: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}
