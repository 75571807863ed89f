package store

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"sync"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// The store hands its own objects to every reader (handlers, the
// schedulers, the controllers) and keeps the caller's object on create:
// one stray write to such an object changes the leader's state and no
// other server's, and nothing would say so. The mutation detector (issue
// 9 item 5, as Kubernetes' cache mutation detector) is on in every test
// binary and wherever OUTPOST_MUTATION_DETECTOR is set (make test sets it
// for the server processes the end-to-end tests start). The stored bytes
// are the reference: they are the encoding of the stored object
// (TestLeaderShortcutsMatchFollowers), so an object that no longer
// encodes to them, or to bytes of their hash once the entry dropped them,
// was changed behind the store's back. It checks an
// entry when a write replaces or removes it, and every entry when a
// snapshot is written; a change fails loudly, naming the object.
//
// A test binary is recognised by the test.v flag its testing package
// registers before any test runs (importing testing here would link it
// into the outpost binary), so the check is made at first use.
var detectMutations = sync.OnceValue(func() bool {
	return os.Getenv("OUTPOST_MUTATION_DETECTOR") != "" || flag.Lookup("test.v") != nil
})

// onMutation is what a detected change does: panic, as Kubernetes'
// detector does, so that the test that made it fails with the message.
var onMutation = func(msg string) { panic(msg) }

// checkUnchanged reports a change to e's object since it was stored, and
// returns the object's encoding now. An entry that still keeps its JSON
// is compared byte for byte; one that dropped it (see entry) by its hash,
// the state hash's part (entry.sum).
func checkUnchanged(t *table, e *entry) []byte {
	now, err := api.Marshal(e.obj)
	stored := e.kept()
	switch {
	case err != nil:
	case stored != nil && bytes.Equal(now, stored):
		return now
	case stored == nil && hashJSON(t, now) == e.sum:
		return now
	}
	m := e.obj.GetObjectMeta()
	name := m.Name
	if m.Namespace != "" {
		name = m.Namespace + "/" + name
	}
	var diff string
	if stored != nil || err != nil {
		diff = firstDifference(stored, now, err)
	} else {
		// Without the stored bytes only the new encoding can be shown.
		diff = fmt.Sprintf("its encoding no longer has the stored hash; it is now %.600s", now)
	}
	msg := fmt.Sprintf("store: %s %s (resourceVersion %s) was changed after the store handed it out; "+
		"a caller must change a copy, never a stored object: %s", t.res.Plural, name, m.ResourceVersion, diff)
	onMutation(msg)
	return now
}

// firstDifference shows where two encodings part, with some context.
func firstDifference(stored, now []byte, err error) string {
	if err != nil {
		return "it no longer encodes: " + err.Error()
	}
	i := 0
	for i < len(stored) && i < len(now) && stored[i] == now[i] {
		i++
	}
	from := max(0, i-40)
	clip := func(b []byte) string { return string(b[from:min(len(b), i+40)]) }
	return fmt.Sprintf("at byte %d, stored …%s… now …%s…", i, clip(stored), clip(now))
}
