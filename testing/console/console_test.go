package console

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

var (
	rsRes     = api.ResourceForKind("ReplicaSet")
	deployRes = api.ResourceForKind("Deployment")
)

func deployment(ns, name, image string, replicas int32) *api.Deployment {
	labels := map[string]string{"app": name}
	return &api.Deployment{
		TypeMeta:   api.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"},
		ObjectMeta: api.ObjectMeta{Namespace: ns, Name: name},
		Spec: api.DeploymentSpec{
			Replicas: &replicas,
			Selector: &api.LabelSelector{MatchLabels: labels},
			Template: api.PodTemplateSpec{
				ObjectMeta: api.ObjectMeta{Labels: labels},
				Spec:       api.PodSpec{Containers: []api.Container{{Name: "web", Image: image}}},
			},
		},
	}
}

// replicaSetOf waits for the ReplicaSet of deployment ns/name whose
// template runs image, and returns its name.
func replicaSetOf(t *testing.T, c *cluster, ns, name, image string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		items, _, err := c.admin.List(context.Background(), rsRes, ns, client.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range items {
			rs := o.(*api.ReplicaSet)
			owned := len(rs.OwnerReferences) > 0 && rs.OwnerReferences[0].Name == name
			if owned && rs.Spec.Template.Spec.Containers[0].Image == image {
				return rs.Name
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ReplicaSet of deployment %s/%s runs %s", ns, name, image)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// podRowsOwnedBy is the expression counting the rows of the page's pods
// table whose owner column names rs and whose status is Running.
func podRowsOwnedBy(rs string) string {
	return fmt.Sprintf(`[...document.querySelectorAll('[data-table=pods] tr.row')].filter((r) => r.children[2].textContent === %s)`, jsString("ReplicaSet/"+rs))
}

// TestConsole drives the console as a user would: log in with the admin
// token, see the nodes, watch one go NotReady when its agent stops,
// follow a rolling update, read a pod's page, and log in as a developer
// who sees only its namespace.
func TestConsole(t *testing.T) {
	b := newBrowser(t)
	c := startCluster(t, 2*time.Second)
	agents := c.agents(t, 3, false)
	c.namespace(t, "team-a")
	c.namespace(t, "team-b")
	c.create(t, deployment("team-a", "web", "example.com/web:1", 3))
	c.create(t, deployment("team-b", "other", "example.com/other:1", 1))
	base := c.s.URL()

	tab := b.tab()
	b.login(tab, base, c.cfg.Token, "")
	if href := eval[string](b, tab, `location.href`); strings.Contains(href, c.cfg.Token) || strings.Contains(href, strings.SplitN(c.cfg.Token, ".", 2)[1]) {
		t.Errorf("the token is in the URL: %s", href)
	}
	if got := eval[string](b, tab, `sessionStorage.getItem('outpost.token')`); got != c.cfg.Token {
		t.Errorf("sessionStorage token = %q, want the one typed", got)
	}

	// Nodes, with zone and roles, all Ready.
	for _, n := range agents.Names() {
		b.waitJS(tab, n+" Ready in the nodes table", rowText("nodes", n, 1)+` === 'Ready'`, 20*time.Second)
	}
	if zone := eval[string](b, tab, rowText("nodes", "worker-0001", 3)); zone != "zone-a" {
		t.Errorf("zone column of worker-0001 = %q, want zone-a", zone)
	}
	if p := eval[string](b, tab, rowText("nodes", "worker-0001", 4)); p != "none" {
		t.Errorf("pressure column of worker-0001 = %q, want none", p)
	}
	b.screenshot(tab, "nodes")

	// Its agent stops: the node goes NotReady on the open page, through
	// the watch (the marker proves the page was not reloaded).
	b.run(tab, "mark the page", chromedp.Evaluate[chromedp.Void](`window.__sameDocument = true`))
	if err := agents.Silence("worker-0002"); err != nil {
		t.Fatal(err)
	}
	b.waitJS(tab, "worker-0002 NotReady", rowText("nodes", "worker-0002", 1)+`.startsWith('NotReady')`, 30*time.Second)
	if !eval[bool](b, tab, `window.__sameDocument === true`) {
		t.Error("the page was reloaded to show NotReady")
	}
	if got := eval[string](b, tab, rowText("nodes", "worker-0001", 1)); got != "Ready" {
		t.Errorf("worker-0001 shows %q, want Ready", got)
	}
	b.screenshot(tab, "node-notready")
	// Taints the node lifecycle controller adds show up too.
	b.waitJS(tab, "worker-0002's unreachable taint", rowText("nodes", "worker-0002", 5)+`.includes('node.kubernetes.io/unreachable')`, 20*time.Second)
	if err := agents.Resume("worker-0002"); err != nil {
		t.Fatal(err)
	}

	// A rolling update, followed on the deployment's page.
	old := replicaSetOf(t, c, "team-a", "web", "example.com/web:1")
	b.run(tab, "open the deployment", chromedp.Navigate(base+"/ui/#/deployment/team-a/web"))
	b.waitJS(tab, "three Running pods of "+old, podRowsOwnedBy(old)+`.filter((r) => r.children[4].textContent === 'Running').length === 3`, 30*time.Second)
	b.screenshot(tab, "deployment-before")
	b.run(tab, "mark the page", chromedp.Evaluate[chromedp.Void](`window.__sameDocument = true`))
	obj, err := c.admin.Get(context.Background(), deployRes, "team-a", "web", client.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := obj.(*api.Deployment)
	d.Spec.Template.Spec.Containers[0].Image = "example.com/web:2"
	if _, _, err := c.admin.Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	next := replicaSetOf(t, c, "team-a", "web", "example.com/web:2")
	b.waitJS(tab, "a pod of the new replica set "+next, podRowsOwnedBy(next)+`.length > 0`, 30*time.Second)
	b.screenshot(tab, "deployment-rolling")
	b.waitJS(tab, "three Running pods of "+next+" and none of "+old,
		podRowsOwnedBy(next)+`.filter((r) => r.children[4].textContent === 'Running').length === 3 && `+podRowsOwnedBy(old)+`.length === 0`, 60*time.Second)
	b.waitJS(tab, "both replica sets listed", rowText("replicasets", "team-a/"+old, 0)+` !== '' && `+rowText("replicasets", "team-a/"+next, 0)+` !== ''`, 10*time.Second)
	if !eval[bool](b, tab, `window.__sameDocument === true`) {
		t.Error("the page was reloaded during the rollout")
	}
	b.screenshot(tab, "deployment-after")

	// A pod's page: its status and the log route's answer (simulated
	// agents have no log endpoint, so the API's refusal is shown).
	pod := eval[string](b, tab, podRowsOwnedBy(next)+`[0].dataset.key`)
	ns, name, _ := strings.Cut(pod, "/")
	b.run(tab, "open the pod", chromedp.Navigate(base+"/ui/#/pod/"+ns+"/"+name))
	b.waitJS(tab, "the pod's page", `document.querySelector('[data-object] table') !== null && document.querySelector('[data-object]').innerText.includes('Running')`, 10*time.Second)
	b.waitJS(tab, "the log box answered", `(document.querySelector('pre.logs') || {}).textContent !== ''`, 10*time.Second)
	b.screenshot(tab, "pod")

	// The admin sees the cluster pages.
	b.run(tab, "open the control plane", chromedp.Navigate(base+"/ui/#/controlplane"))
	b.waitJS(tab, "the raft member listed", `(document.querySelector('[data-polled="raft members"]') || {innerText: ''}).innerText.includes('s1')`, 10*time.Second)
	b.screenshot(tab, "controlplane")

	// A developer of team-a: its pods, and "not permitted" where the API
	// refuses it.
	dev := b.tab()
	devToken := c.token(t, api.TokenSpec{Role: api.RoleDeveloper, Namespaces: []string{"team-a"}})
	b.login(dev, base, devToken, "team-a")
	b.run(dev, "open pods", chromedp.Navigate(base+"/ui/#/pods"))
	b.waitJS(dev, "team-a's three pods", `document.querySelector('[data-table=pods] .count')?.textContent === '3 pods'`, 20*time.Second)
	if n := eval[int](b, dev, `[...document.querySelectorAll('[data-table=pods] tr.row')].filter((r) => r.dataset.key && !r.dataset.key.startsWith('team-a/')).length`); n != 0 {
		t.Errorf("the developer sees %d pods of other namespaces", n)
	}
	b.screenshot(dev, "developer-pods")
	b.run(dev, "open machines", chromedp.Navigate(base+"/ui/#/machines"))
	b.waitJS(dev, "machines not permitted", `document.querySelector('[data-forbidden=machines]')?.textContent.startsWith('Not permitted')`, 10*time.Second)
	b.run(dev, "open the control plane", chromedp.Navigate(base+"/ui/#/controlplane"))
	b.waitJS(dev, "raft members not permitted", `!!document.querySelector('[data-forbidden="raft members"]')`, 10*time.Second)
	b.screenshot(dev, "developer-forbidden")
	// Another namespace, or all of them: not permitted, said so.
	b.run(dev, "choose team-b", chromedp.Navigate(base+"/ui/#/pods"), chromedp.SetValue(chromedp.ID("ns"), "team-b"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('ns').dispatchEvent(new Event('change'))`))
	b.waitJS(dev, "team-b's pods not permitted", `!!document.querySelector('[data-forbidden=pods]')`, 10*time.Second)
	b.screenshot(dev, "developer-other-namespace")
	// Developers may read nodes, as in the API.
	b.run(dev, "open nodes", chromedp.Navigate(base+"/ui/#/nodes"))
	b.waitJS(dev, "nodes for the developer", rowText("nodes", "worker-0001", 1)+` !== ''`, 10*time.Second)

	// A refused token never gets in.
	bad := b.tab()
	b.run(bad, "log in with a bad token", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), "abcdef.0123456789abcdef0123456789abcdef"), chromedp.Click(chromedp.CSS(`#login button[type=submit]`)))
	b.waitJS(bad, "the refusal", `document.getElementById('loginerr').textContent.includes('refused')`, 10*time.Second)
	if s := eval[string](b, bad, `sessionStorage.getItem('outpost.token') || ''`); s != "" {
		t.Errorf("a refused token stays in sessionStorage: %q", s)
	}
}
