package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/agent/sim"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// Agents replacing their binary in waves (issue 13's performance
// section): three real servers already on the release's version (so the
// update's control-plane part has nothing to do), simulated agents that
// each download the release's binary from the API when the cluster
// version controller names it for their node, check its digest, and
// report the version a restart later. Timed from the desired update to
// history Completed; the API's load is sampled every second from the
// servers' request counters.

type agentWaveResult struct {
	agents       int
	restart      time.Duration
	total        time.Duration
	binaryMiB    float64
	peakRequests float64 // per second, all servers
	peakNamed    int     // agents named at once, at most
	err          string
}

func runAgentWaveBench(ctx context.Context, bin string, agents int, restart time.Duration) agentWaveResult {
	r := agentWaveResult{agents: agents, restart: restart}
	if err := agentWaveOnce(ctx, bin, &r); err != nil {
		r.err = err.Error()
		log.Printf("agent binary waves: %v", err)
	} else {
		log.Printf("agent binary waves: %d agents, %v restart each: %v; peak %.0f API requests/s, at most %d named at once", agents, restart, r.total, r.peakRequests, r.peakNamed)
	}
	return r
}

func agentWaveOnce(ctx context.Context, bin string, r *agentWaveResult) error {
	bc, err := startBenchCluster(ctx, bin, "outpost-agentwave-bench-", "--no-default-scheduler")
	if err != nil {
		return err
	}
	defer bc.close()
	ref, version, trusted, err := benchRelease(ctx, bin, bc.root)
	if err != nil {
		return err
	}
	if st, err := os.Stat(bin); err == nil {
		r.binaryMiB = float64(st.Size()) / (1 << 20)
	}
	doc := "apiVersion: v1\nkind: Node\nmetadata:\n  name: wave\n"
	tmpl, _, err := sim.LoadNodes([]byte(doc))
	if err != nil {
		return err
	}
	agents, err := sim.Start(ctx, sim.Config{Client: bc.admin, Nodes: tmpl, Count: r.agents, Heartbeat: 10 * time.Second, DisablePods: true,
		BinaryUpdateDuration: r.restart, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer agents.Stop()
	if err := waitNodes(ctx, bc.cl, r.agents, 10*time.Minute); err != nil {
		return err
	}
	cvr := api.ResourceForKind("ClusterVersion")
	obj, err := bc.cl.Get(ctx, cvr, "", api.ClusterVersionName, client.GetOptions{})
	if err != nil {
		return err
	}
	cv := obj.(*api.ClusterVersion)
	// Forced: the servers run from no self-update directory (they are
	// on the release's version already).
	cv.Spec.TrustedKeys, cv.Spec.DesiredUpdate = trusted, &api.Update{Image: ref, Force: true}
	sctx, stopSampling := context.WithCancel(ctx)
	peak := make(chan float64, 1)
	go func() { peak <- sampleRequests(sctx, bc) }()
	t0 := time.Now()
	if _, _, err := bc.cl.Update(ctx, cv); err != nil {
		stopSampling()
		return err
	}
	deadline := time.Now().Add(15 * time.Minute)
	for {
		obj, err := bc.cl.Get(ctx, cvr, "", api.ClusterVersionName, client.GetOptions{})
		if err == nil {
			cv := obj.(*api.ClusterVersion)
			// The image tells this update's entry from the one recorded
			// at install (the same version).
			if h := cv.Status.History; len(h) > 0 && h[0].Image == ref && h[0].State == api.UpdateCompleted {
				break
			}
		}
		if nodes, _, err := bc.cl.List(ctx, api.ResourceForKind("Node"), "", client.ListOptions{}); err == nil {
			named := 0
			for _, o := range nodes {
				n := o.(*api.Node)
				if strings.HasPrefix(n.Annotations[api.AnnotationAgentBinary], version+" ") && n.Status.NodeInfo.KubeletVersion != version {
					named++
				}
			}
			r.peakNamed = max(r.peakNamed, named)
		}
		if time.Now().After(deadline) {
			stopSampling()
			return fmt.Errorf("the update did not complete in 15 minutes")
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.total = time.Since(t0)
	stopSampling()
	r.peakRequests = <-peak
	return nil
}

// benchRelease builds and signs a release of bin's own version with bin
// as its linux/amd64 binary, and returns its reference, version and the
// trusted key.
func benchRelease(ctx context.Context, bin, dir string) (ref, version, trusted string, err error) {
	out, err := exec.CommandContext(ctx, bin, "version").CombinedOutput()
	for l := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "Client Version: "); ok {
			version = v
		}
	}
	if version == "" {
		return "", "", "", fmt.Errorf("%s version: %v: %s", bin, err, out)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", err
	}
	der, _ := x509.MarshalECPrivateKey(key)
	keyFile := filepath.Join(dir, "release.key")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return "", "", "", err
	}
	pub, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	manifests := filepath.Join(dir, "manifests")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		return "", "", "", err
	}
	if err := os.WriteFile(filepath.Join(manifests, "0000_10_edge_00-namespace.yaml"), []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: edge\n"), 0o644); err != nil {
		return "", "", "", err
	}
	payload := filepath.Join(dir, "release.tar")
	if out, err := exec.CommandContext(ctx, bin, "adm", "release", "new", "--from-dir", manifests, "--version", version,
		"--binary", "linux/amd64="+bin, "--to-file", payload, "--sign-key", keyFile).CombinedOutput(); err != nil {
		return "", "", "", fmt.Errorf("adm release new: %v: %s", err, out)
	}
	info, err := exec.CommandContext(ctx, bin, "adm", "release", "info", payload).CombinedOutput()
	if err != nil {
		return "", "", "", fmt.Errorf("adm release info: %v: %s", err, info)
	}
	digest := ""
	for l := range strings.Lines(string(info)) {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "Digest:" {
			digest = f[1]
		}
	}
	return "file://" + payload + "@" + digest, version, string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})), nil
}

// sampleRequests reads every server's request counter each second until
// ctx ends and returns the highest rate seen (requests per second, all
// servers together).
func sampleRequests(ctx context.Context, bc *benchCluster) float64 {
	var clients []*client.Client
	for _, s := range bc.c.Servers {
		if cl, err := s.Client(); err == nil {
			clients = append(clients, cl)
		}
	}
	total := func() float64 {
		var sum float64
		for _, cl := range clients {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			body, _, err := cl.Do(rctx, "GET", "/metrics", nil, nil)
			cancel()
			if err != nil {
				continue
			}
			v, _ := metricSum(body, "outpost_api_requests_total")
			sum += v
		}
		return sum
	}
	peak, last, at := 0.0, total(), time.Now()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return peak
		case <-t.C:
		}
		now, v := time.Now(), total()
		peak = max(peak, (v-last)/now.Sub(at).Seconds())
		last, at = v, now
	}
}

func releasesMarkdown(w agentWaveResult, cmd, real string) string {
	var b strings.Builder
	b.WriteString("\n## Release updates (issue 13)\n\n`" + cmd + "`.\n\n")
	b.WriteString("### Three servers replacing their binary on hosts booting a real systemd\n\n`BenchmarkReleaseUpdateRealSystemd` in testing/e2e: three nspawn hosts (network namespaces), each the packaged `outpost-server.service`; 10,000 objects stored first; `outpost adm upgrade --to 1.1.0` (the same code stamped with another version); one client writes namespaces and four run the linearizability workload throughout; the raft peers are sampled every 100 ms for each server's restart (from its status probe failing to it answering, a ready voter, on 1.1.0). Targets: no gap over 2 s without an acknowledged write; each restart under 5 s to healthy.\n\n```\n")
	b.WriteString(real)
	b.WriteString("\n```\n\n### Agents replacing their binary in waves\n\n")
	fmt.Fprintf(&b, "Three real servers (`--no-default-scheduler`) already on the release's version, %d simulated agents (`outpost sim agents --binary-update-duration %v`): each named agent downloads the release's binary (%.0f MiB) from the API by digest, checks it, and reports the version %v later (its restart); waves of 10%% of the nodes. Timed from the desired update to history Completed; the servers' request counters are sampled every second.\n\n", w.agents, w.restart, w.binaryMiB, w.restart)
	if w.err != "" {
		b.WriteString("Failed: " + w.err + "\n")
		return b.String()
	}
	fmt.Fprintf(&b, "| agents | wave | restart each | total | peak API requests/s (3 servers) | most named at once |\n|---:|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| %d | %d | %v | %.1f s | %.0f | %d |\n", w.agents, max(1, w.agents/10), w.restart, w.total.Seconds(), w.peakRequests, w.peakNamed)
	return b.String()
}
