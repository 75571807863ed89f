// Command testbin is the process inside the runtime contract suite's test
// image: a static binary whose first argument picks a behaviour the suite
// asserts on (exit codes, signals, output, cgroup limits, a host port).
// runtime/fake simulates the same commands, so both runtimes face one
// suite. It is built by the suite with CGO_ENABLED=0 and never shipped.
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testbin COMMAND [ARGS]")
		os.Exit(2)
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "sleep":
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		fmt.Println("sleeping")
		<-term
		fmt.Println("got SIGTERM")
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ignoring SIGTERM")
		for {
			// Not select{}: with no other goroutine, Go would call
			// that a deadlock and exit.
			time.Sleep(time.Hour)
		}
	case "exit":
		code := 0
		if len(args) > 0 {
			code, _ = strconv.Atoi(args[0])
		}
		fmt.Printf("exiting %d\n", code)
		os.Exit(code)
	case "hold":
		// Holds N MiB, every page touched, until SIGTERM.
		n := 0
		if len(args) > 0 {
			n, _ = strconv.Atoi(args[0])
		}
		held := make([]byte, n<<20)
		for i := 0; i < len(held); i += 4096 {
			held[i] = 1
		}
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		fmt.Println("holding")
		<-term
		fmt.Println(len(held) >> 20)
	case "echo":
		fmt.Println(strings.Join(args, " "))
	case "stderr":
		fmt.Fprintln(os.Stderr, strings.Join(args, " "))
	case "lines":
		n := 0
		if len(args) > 0 {
			n, _ = strconv.Atoi(args[0])
		}
		for i := 1; i <= n; i++ {
			if i%2 == 1 {
				fmt.Fprintf(os.Stdout, "line %d\n", i)
			} else {
				fmt.Fprintf(os.Stderr, "line %d\n", i)
			}
			// Keep the order readable across the two pipes.
			time.Sleep(5 * time.Millisecond)
		}
	case "ticks":
		n, ms := 5, 100
		if len(args) > 0 {
			n, _ = strconv.Atoi(args[0])
		}
		if len(args) > 1 {
			ms, _ = strconv.Atoi(args[1])
		}
		for i := 1; i <= n; i++ {
			fmt.Printf("tick %d\n", i)
			time.Sleep(time.Duration(ms) * time.Millisecond)
		}
	case "env":
		wd, _ := os.Getwd()
		fmt.Printf("ARGS=%s\n", strings.Join(args, ","))
		fmt.Printf("CWD=%s\n", wd)
		env := os.Environ()
		sort.Strings(env)
		for _, e := range env {
			fmt.Printf("ENV %s\n", e)
		}
	case "cat":
		// Copies stdin to stdout until EOF (exec with stdin).
		if _, err := io.Copy(os.Stdout, os.Stdin); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("EOF")
	case "limits":
		fmt.Println(limits())
	case "listen":
		listen(args)
	case "mount-check":
		dir := "/mnt"
		if len(args) > 0 {
			dir = args[0]
		}
		b, err := os.ReadFile(dir + "/in.txt")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("read %s\n", strings.TrimSpace(string(b)))
		if err := os.WriteFile(dir+"/out.txt", []byte("written by container\n"), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "oom":
		// Touch memory until the cgroup's limit kills the process.
		var hold [][]byte
		for {
			b := make([]byte, 1<<20)
			for i := range b {
				b[i] = 1
			}
			hold = append(hold, b)
		}
	default:
		fmt.Fprintf(os.Stderr, "testbin: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

func listen(args []string) {
	port := "8080"
	if len(args) > 0 {
		port = args[0]
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, "hello from testbin")
			c.Close()
		}
	}()
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	<-term
}

// limits prints the process's own cgroup limits, reading cgroup v2's
// unified files when they exist and v1's per-controller ones otherwise.
// Unlimited values print as "max".
func limits() string {
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			return "?"
		}
		return strings.TrimSpace(string(b))
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		base := "/sys/fs/cgroup" + ownV2Path()
		quota, period, _ := strings.Cut(read(base+"/cpu.max"), " ")
		return fmt.Sprintf("cgroup=v2 memory=%s cpu_quota=%s cpu_period=%s cpu_weight=%s pids=%s",
			read(base+"/memory.max"), quota, period, read(base+"/cpu.weight"), read(base+"/pids.max"))
	}
	mem := read("/sys/fs/cgroup/memory/memory.limit_in_bytes")
	if n, err := strconv.ParseUint(mem, 10, 64); err == nil && n >= 1<<62 {
		mem = "max"
	}
	quota := read("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us")
	if quota == "?" {
		quota = read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
	}
	if quota == "-1" {
		quota = "max"
	}
	period := read("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us")
	if period == "?" {
		period = read("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
	}
	shares := read("/sys/fs/cgroup/cpu,cpuacct/cpu.shares")
	if shares == "?" {
		shares = read("/sys/fs/cgroup/cpu/cpu.shares")
	}
	return fmt.Sprintf("cgroup=v1 memory=%s cpu_quota=%s cpu_period=%s cpu_shares=%s pids=%s",
		mem, quota, period, shares, read("/sys/fs/cgroup/pids/pids.max"))
}

// ownV2Path is the process's cgroup under a v2 mount: "" inside a cgroup
// namespace (the container's cgroup is the root), else its full path.
func ownV2Path() string {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if p, ok := strings.CutPrefix(s.Text(), "0::"); ok && p != "/" {
			if _, err := os.Stat("/sys/fs/cgroup" + p + "/memory.max"); err == nil {
				return p
			}
		}
	}
	return ""
}
