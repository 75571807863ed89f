package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"go.uber.org/zap"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: etcd-bench serve [etcd flags] | run [-levels 1,16,64,256] [-duration 10s]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		etcdmain.Main(append([]string{"etcd"}, os.Args[2:]...))
	case "run":
		fs := flag.NewFlagSet("run", flag.ExitOnError)
		levels := fs.String("levels", "1,16,64,256", "concurrent clients per level")
		dur := fs.Duration("duration", 10*time.Second, "time per level")
		size := fs.Int("value-bytes", 1024, "bytes per value")
		_ = fs.Parse(os.Args[2:])
		if err := run(context.Background(), *levels, *dur, *size); err != nil {
			log.Fatal(err)
		}
	default:
		fmt.Fprintf(os.Stderr, "etcd-bench: unknown subcommand %q\n", os.Args[1])
		os.Exit(2)
	}
}

// Level is one load level's result, printed as a JSON line.
type Level struct {
	Clients   int     `json:"clients"`
	Ops       int64   `json:"ops"`
	Errors    int64   `json:"errors"`
	Seconds   float64 `json:"seconds"`
	P50ms     float64 `json:"p50_ms"`
	P99ms     float64 `json:"p99_ms"`
	ServerCPU float64 `json:"server_cpu_s"`
	Version   string  `json:"version"`
	FirstErr  string  `json:"first_error,omitempty"`
}

type member struct {
	name, client, peer string
	cmd                *exec.Cmd
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func run(ctx context.Context, levelsArg string, dur time.Duration, size int) error {
	root, err := os.MkdirTemp("", "etcd-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var ms []*member
	for i := range 3 {
		c, err := freePort()
		if err != nil {
			return err
		}
		p, err := freePort()
		if err != nil {
			return err
		}
		ms = append(ms, &member{name: fmt.Sprintf("e%d", i+1), client: c, peer: p})
	}
	var initial []string
	for _, m := range ms {
		initial = append(initial, m.name+"=https://"+m.peer)
	}
	for _, m := range ms {
		dir := filepath.Join(root, m.name)
		logf, err := os.Create(dir + ".log")
		if err != nil {
			return err
		}
		defer logf.Close()
		m.cmd = exec.Command(self, "serve",
			"--name", m.name, "--data-dir", dir,
			"--listen-client-urls", "https://"+m.client, "--advertise-client-urls", "https://"+m.client,
			"--listen-peer-urls", "https://"+m.peer, "--initial-advertise-peer-urls", "https://"+m.peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--auto-tls", "--peer-auto-tls", "--log-level", "warn",
			// outpost snapshots every 8,192 entries in this benchmark;
			// etcd's default is 10,000: about the same.
		)
		m.cmd.Stdout, m.cmd.Stderr = logf, logf
		m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := m.cmd.Start(); err != nil {
			return fmt.Errorf("start %s: %w", m.name, err)
		}
		defer func() { _ = m.cmd.Process.Kill(); _ = m.cmd.Wait() }()
	}
	tlsCfg := &tls.Config{InsecureSkipVerify: true} // self-signed (--auto-tls), loopback only
	var eps []string
	for _, m := range ms {
		eps = append(eps, "https://"+m.client)
	}
	// Wait for a leader, then talk to it only, as outpost's clients do.
	var leader, version string
	deadline := time.Now().Add(60 * time.Second)
	for leader == "" {
		if time.Now().After(deadline) {
			return fmt.Errorf("no etcd leader after 60 s (logs in %s)", root)
		}
		for _, ep := range eps {
			cl, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, TLS: tlsCfg, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
			if err != nil {
				continue
			}
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := cl.Status(sctx, ep)
			cancel()
			_ = cl.Close()
			if err == nil && st.Leader != 0 && st.Header.MemberId == st.Leader {
				leader, version = ep, st.Version
				break
			}
		}
		if leader == "" {
			time.Sleep(200 * time.Millisecond) // polling the cluster's start, bounded by the deadline
		}
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{leader}, TLS: tlsCfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cl.Close()
	val := strings.Repeat("x", size)
	var seq atomic.Int64
	enc := json.NewEncoder(os.Stdout)
	for _, ls := range strings.Split(levelsArg, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(ls))
		if err != nil {
			return fmt.Errorf("level %q: %w", ls, err)
		}
		lv := level(ctx, cl, ms, n, dur, val, &seq)
		lv.Version = version
		if err := enc.Encode(lv); err != nil {
			return err
		}
	}
	return nil
}

func cpuOf(ms []*member) time.Duration {
	var t time.Duration
	for _, m := range ms {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.cmd.Process.Pid))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		t += time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ 100
	}
	return t
}

func level(ctx context.Context, cl *clientv3.Client, ms []*member, n int, dur time.Duration, val string, seq *atomic.Int64) Level {
	lv := Level{Clients: n}
	lat := make([][]time.Duration, n)
	var errs atomic.Int64
	var firstErr atomic.Value
	cpu0 := cpuOf(ms)
	start := time.Now()
	end := start.Add(dur)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				key := fmt.Sprintf("/registry/pods/bench/p%d", seq.Add(1))
				t0 := time.Now()
				// Create-if-absent, as outpost's POST of a new name.
				r, err := cl.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
					Then(clientv3.OpPut(key, val)).Commit()
				if err == nil && !r.Succeeded {
					err = fmt.Errorf("key %s exists", key)
				}
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	lv.Seconds = time.Since(start).Seconds()
	lv.ServerCPU = (cpuOf(ms) - cpu0).Seconds()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	lv.Ops, lv.Errors = int64(len(all)), errs.Load()
	if len(all) > 0 {
		lv.P50ms = float64(all[len(all)/2]) / 1e6
		lv.P99ms = float64(all[len(all)*99/100]) / 1e6
	}
	if e, ok := firstErr.Load().(string); ok {
		lv.FirstErr = e
	}
	return lv
}
