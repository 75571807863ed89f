package linearize

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// Causes of an unknown outcome, kept apart in Output.Cause: a server that
// answered 504 vouched for not knowing, a client that gave up did not give
// the server the chance to say whether it applied the write or refused it
// (a 503 the checker would then drop).
const (
	CauseServer504    = "server-504"
	CauseClientGaveUp = "client-gave-up"
)

// Workload drives clients that create, conditionally update, delete and
// read objects named by Keys in Namespace, and records what they learn.
// The objects are headless services, which no controller writes: a pod
// gets status updates from the scheduler (Unschedulable, with no nodes),
// versions the clients never wrote.
type Workload struct {
	History   *History
	Keys      []string
	Namespace string
	// OpTimeout is how long a client waits for one answer. Longer than the
	// server's own apply and read timeouts, so that a server's verdict (504
	// or a wrongly clean 503) reaches the history instead of the client's
	// impatience.
	OpTimeout time.Duration
}

var objRes = api.ResourceForKind("Service")

// Run is one client, id, talking only to cl until ctx ends: a real client
// with one configured endpoint does the same.
func (w *Workload) Run(ctx context.Context, id int, cl *client.Client) {
	rng := rand.New(rand.NewPCG(uint64(id), 99))
	timeout := w.OpTimeout
	if timeout == 0 {
		timeout = 20 * time.Second
	}
	seen := map[string]string{} // key -> last resourceVersion this client saw
	seq := 0
	for ctx.Err() == nil {
		key := w.Keys[rng.IntN(len(w.Keys))]
		seq++
		val := fmt.Sprintf("c%d-%d", id, seq)
		rv := seen[key]
		if rv == "" {
			rv = "1"
		}
		opCtx, cancel := context.WithTimeout(ctx, timeout)
		var in Input
		var obj api.Object
		var err error
		call := w.History.Call()
		switch r := rng.IntN(20); {
		case r < 5:
			in = Input{Kind: OpCreate, Key: key, Value: val}
			obj, _, err = cl.Create(opCtx, w.object(key, val, ""))
		case r < 12:
			in = Input{Kind: OpUpdate, Key: key, Value: val, ExpectRV: rv}
			obj, _, err = cl.Update(opCtx, w.object(key, val, rv))
		case r < 14:
			in = Input{Kind: OpDelete, Key: key, ExpectRV: rv}
			_, err = cl.Delete(opCtx, objRes, w.Namespace, key, &client.Preconditions{ResourceVersion: rv})
		default:
			in = Input{Kind: OpRead, Key: key}
			obj, err = cl.Get(opCtx, objRes, w.Namespace, key, client.GetOptions{Consistent: true})
		}
		cancel()
		// A request the run's end cut off is a client that gave up:
		// Classify records a write as unknown, since it may still apply.
		out, record := Classify(in.Kind, obj, err)
		if record {
			w.History.Done(id, call, in, out)
			if out.RV != "" {
				seen[key] = out.RV
			}
		}
		if err != nil && !api.IsAlreadyExists(err) && !api.IsConflict(err) && !api.IsNotFound(err) {
			// The cluster is in a fault: back off a little instead of
			// filling the history with failed attempts.
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(20+rng.IntN(30)) * time.Millisecond):
			}
		}
	}
}

// RunAll runs n clients until ctx ends, client i talking only to
// clients[i%len(clients)], and waits for them.
func (w *Workload) RunAll(ctx context.Context, n int, clients []*client.Client) {
	var wg sync.WaitGroup
	for id := range n {
		wg.Go(func() { w.Run(ctx, id, clients[id%len(clients)]) })
	}
	wg.Wait()
}

func (w *Workload) object(name, value, rv string) *api.Service {
	return &api.Service{
		ObjectMeta: api.ObjectMeta{Name: name, Namespace: w.Namespace, ResourceVersion: rv, Annotations: map[string]string{"v": value}},
		Spec:       api.ServiceSpec{ClusterIP: "None"},
	}
}

// Classify turns a reply into the model's output, and reports whether the
// operation belongs in the history. A 503 means the server refused the
// write before it reached raft, a write that never left the client (the
// connection was refused) did nothing, and a failed read tells nothing:
// none is recorded. Any other failure of a write may or may not have
// taken effect.
func Classify(kind string, obj api.Object, err error) (Output, bool) {
	switch {
	case err == nil && kind == OpDelete:
		return Output{Result: ResOK}, true
	case err == nil:
		m := obj.GetObjectMeta()
		return Output{Result: ResOK, RV: m.ResourceVersion, Value: m.Annotations["v"]}, true
	case api.IsAlreadyExists(err) && kind == OpCreate:
		return Output{Result: ResExists}, true
	case api.IsConflict(err) && (kind == OpUpdate || kind == OpDelete):
		return Output{Result: ResConflict}, true
	case api.IsNotFound(err):
		return Output{Result: ResNotFound}, true
	case kind == OpRead || api.ReasonOf(err) == api.ReasonServiceUnavailable || neverSent(err):
		return Output{}, false
	}
	if _, ok := errors.AsType[*api.StatusError](err); ok {
		return Output{Result: ResUnknown, Cause: CauseServer504}, true
	}
	return Output{Result: ResUnknown, Cause: CauseClientGaveUp}, true
}

// neverSent reports whether the request failed before a connection
// existed, so the server cannot have seen it.
func neverSent(err error) bool {
	if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Op == "dial" {
		return true
	}
	return false
}

// Summary counts the recorded operations by kind, result and cause, for a
// test's log: "create/ok=120 update/unknown(server-504)=3 ...".
func Summary(h *History) (string, map[string]int) {
	counts := map[string]int{}
	for _, op := range h.Operations() {
		in, out := op.Input.(Input), op.Output.(Output)
		k := in.Kind + "/" + out.Result
		if out.Cause != "" {
			k += "(" + out.Cause + ")"
		}
		counts[k]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, counts[k])
	}
	return strings.TrimSpace(b.String()), counts
}

// Thin reports why a history is too thin to mean anything: it needs
// acknowledged creates, updates and reads.
func Thin(counts map[string]int) error {
	for _, k := range []string{OpCreate, OpUpdate, OpRead} {
		if counts[k+"/"+ResOK] == 0 {
			return fmt.Errorf("no acknowledged %s", k)
		}
	}
	return nil
}
