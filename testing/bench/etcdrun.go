package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"time"
)

// etcdBench is the etcd-bench binary (module testing/bench/etcd), or "".
var etcdBench string

// etcdLevel is one line of `etcd-bench run`'s output.
type etcdLevel struct {
	Clients   int     `json:"clients"`
	Ops       int64   `json:"ops"`
	Errors    int64   `json:"errors"`
	Seconds   float64 `json:"seconds"`
	P50ms     float64 `json:"p50_ms"`
	P99ms     float64 `json:"p99_ms"`
	ServerCPU float64 `json:"server_cpu_s"`
	Version   string  `json:"version"`
	FirstErr  string  `json:"first_error"`
}

// runEtcd runs the same levels against a 3-member etcd on loopback, before
// outpost's cluster starts, so that the two never share the machine.
func runEtcd(ctx context.Context, levels string, dur time.Duration) (map[int]etcdLevel, string, error) {
	if etcdBench == "" {
		return nil, "", nil
	}
	if _, err := os.Stat(etcdBench); err != nil {
		return nil, "", fmt.Errorf("no etcd-bench binary (make bin/etcd-bench): %w", err)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, etcdBench, "run", "-levels", levels, "-duration", dur.String())
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, "", fmt.Errorf("etcd-bench: %w\n%s", err, stderr.Bytes())
	}
	res := map[int]etcdLevel{}
	version := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var l etcdLevel
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, "", fmt.Errorf("etcd-bench output %q: %w", sc.Text(), err)
		}
		res[l.Clients], version = l, l.Version
	}
	return res, version, nil
}

func (l etcdLevel) opsPerSec() float64 {
	if l.Seconds == 0 {
		return 0
	}
	return float64(l.Ops) / l.Seconds
}
