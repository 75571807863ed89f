package console

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/outpost-edge/outpost/agent/sim"
	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/server"
	"github.com/outpost-edge/outpost/internal/realtest"
	testcluster "github.com/outpost-edge/outpost/testing/cluster"
)

// chromiumPath is Debian's chromium; CHROMIUM overrides it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("CHROMIUM")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(p); err != nil {
		realtest.Require(t, fmt.Sprintf("chromium is not installed (%s: %v; Debian package chromium)", p, err))
	}
	return p
}

// cluster is a one-server cluster on loopback.
type cluster struct {
	s     *server.Server
	admin *client.Client
	cfg   client.Config
}

// startCluster starts a server, with its controllers and scheduler, whose
// nodes go NotReady after grace without a heartbeat.
func startCluster(t *testing.T, grace time.Duration) *cluster {
	t.Helper()
	tc := testcluster.New(t, testcluster.Options{Servers: 1, ControlLoops: true,
		Configure: func(c *server.Config) { c.NodeMonitorGracePeriod = grace }})
	m := tc.Members[0]
	return &cluster{s: m.Server, admin: tc.Client(m), cfg: m.Server.AdminConfig()}
}

// agents simulates count nodes (worker-0001...) in zone-a.
func (c *cluster) agents(t *testing.T, count int, disablePods bool) *sim.Agents {
	t.Helper()
	tmpls, _, err := sim.LoadNodes([]byte("apiVersion: v1\nkind: Node\nmetadata:\n  name: worker\n  labels:\n    topology.kubernetes.io/zone: zone-a\n    node-role.kubernetes.io/worker: \"\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := sim.Start(context.Background(), sim.Config{
		Client: c.cfg, Nodes: tmpls, Count: count, Heartbeat: 200 * time.Millisecond,
		Workers: 32, DisablePods: disablePods,
	})
	if err != nil {
		t.Fatalf("sim.Start: %v", err)
	}
	t.Cleanup(a.Stop)
	return a
}

func (c *cluster) create(t *testing.T, obj api.Object) {
	t.Helper()
	if _, _, err := c.admin.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T: %v", obj, err)
	}
}

// token makes a token of spec and returns it as the user types it.
func (c *cluster) token(t *testing.T, spec api.TokenSpec) string {
	t.Helper()
	id, secret := auth.NewToken()
	spec.SecretHash = auth.HashSecret(secret)
	c.create(t, &api.Token{TypeMeta: api.TypeMeta{Kind: "Token", APIVersion: "outpost.io/v1"}, ObjectMeta: api.ObjectMeta{Name: id}, Spec: spec})
	return id + "." + secret
}

func (c *cluster) namespace(t *testing.T, name string) {
	t.Helper()
	c.create(t, &api.Namespace{TypeMeta: api.TypeMeta{Kind: "Namespace", APIVersion: "v1"}, ObjectMeta: api.ObjectMeta{Name: name}})
}

// browser starts a headless Chromium for the test; each call of tab on it
// opens a new tab (its own sessionStorage).
type browser struct {
	t     *testing.T
	alloc context.Context
	shots string
	n     int
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,                               // tests run as root in containers
		chromedp.Flag("ignore-certificate-errors", true), // the cluster CA is the test's own
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1400, 900),
	)
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	return &browser{t: t, alloc: alloc, shots: screenshotDir(t)}
}

// screenshotDir is where the test's screenshots go (package doc).
func screenshotDir(t *testing.T) string {
	switch v := os.Getenv("OUTPOST_SCREENSHOTS"); v {
	case "":
		return t.TempDir()
	case "1", "true":
		dir, err := filepath.Abs("screenshots")
		if err != nil {
			t.Fatal(err)
		}
		return dir
	default:
		return v
	}
}

// tab opens a tab; its context ends with the test.
func (b *browser) tab() context.Context {
	ctx, cancel := chromedp.NewContext(b.alloc)
	b.t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		realtest.RequireNoError(b.t, fmt.Errorf("starting chromium: %w", err))
	}
	return ctx
}

func (b *browser) run(ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.screenshot(ctx, "failed-"+strings.ReplaceAll(what, " ", "-"))
		b.t.Fatalf("%s: %v", what, err)
	}
}

// screenshot saves the tab as NN-name.png (quality 100 makes chromedp
// write PNG) and logs the path.
func (b *browser) screenshot(ctx context.Context, name string) {
	b.t.Helper()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.MkdirAll(b.shots, 0o755); err != nil {
		b.t.Fatal(err)
	}
	b.n++
	p := filepath.Join(b.shots, fmt.Sprintf("%s-%02d-%s.png", strings.ReplaceAll(b.t.Name(), "/", "-"), b.n, name))
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", p)
}

// waitJS polls a JavaScript expression until it is true, or fails naming
// what it waited for.
func (b *browser) waitJS(ctx context.Context, what, expr string, timeout time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		b.screenshot(ctx, "timeout")
		page, _ := chromedp.Run(b.detached(ctx), chromedp.Evaluate[string](`document.getElementById('main').innerText.slice(0, 2000)`))
		b.t.Fatalf("waiting %v for %s: %v\npage:\n%s", timeout, what, err, page)
	}
}

// detached is ctx's tab with a fresh deadline, for diagnostics after a
// timeout.
func (b *browser) detached(ctx context.Context) context.Context {
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	b.t.Cleanup(cancel)
	return c
}

// eval evaluates expr in the tab.
func eval[T any](b *browser, ctx context.Context, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// login opens the console and logs in with token, naming ns.
func (b *browser) login(ctx context.Context, base, token, ns string) {
	b.t.Helper()
	b.run(ctx, "log in",
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.SendKeys(chromedp.ID("loginns"), ns),
		chromedp.Click(chromedp.CSS(`#login button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("nav")),
	)
}

// jsString quotes s for a JavaScript expression.
func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// rowText is the expression for the text of column col of the row keyed
// key in table name (” when absent).
func rowText(table, key string, col int) string {
	sel := fmt.Sprintf(`[data-table=%q] tr[data-key=%q]`, table, key)
	return fmt.Sprintf(`(() => { const r = document.querySelector(%s); return r ? r.children[%d].textContent : ''; })()`, jsString(sel), col)
}
