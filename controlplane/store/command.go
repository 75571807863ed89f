package store

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Command types: the first byte of every command. A type number is never
// reused and a command's layout never changes; a new layout is a new type.
// Types with cmdIgnorable set may be skipped by a server that does not know
// them (an older one, during a rolling update); any other unknown type stops
// the server, because skipping it would make its state diverge.
const (
	cmdCreate       byte = 0x01
	cmdUpdate       byte = 0x02
	cmdDelete       byte = 0x03
	cmdExpireEvents byte = 0x04
	cmdBatch        byte = 0x05
	cmdBind         byte = 0x06
	// cmdDeleteGrace is cmdDelete with a grace period after it: a pod
	// bound to a node is marked terminating rather than removed.
	cmdDeleteGrace byte = 0x07

	// cmdIgnorable marks a command that a server may skip if it does not
	// know the type.
	cmdIgnorable byte = 0x80
)

// rvPlaceholder is the resourceVersion of a create command's body, which
// Apply replaces with the entry's index.
const rvPlaceholder = "0"

// prepareCreate sets what the store sets on every new object; it reports
// whether obj was already so.
func prepareCreate(r *api.Resource, obj api.Object) bool {
	same := true
	tm := obj.GetTypeMeta()
	if tm.APIVersion != r.APIVersion() || tm.Kind != r.Kind {
		tm.APIVersion, tm.Kind = r.APIVersion(), r.Kind
		same = false
	}
	m := obj.GetObjectMeta()
	if !r.Namespaced && m.Namespace != "" {
		m.Namespace = ""
		same = false
	}
	if m.Generation != 1 {
		m.Generation = 1
		same = false
	}
	if m.DeletionTimestamp != nil || m.DeletionGracePeriodSeconds != nil {
		m.DeletionTimestamp, m.DeletionGracePeriodSeconds = nil, nil
		same = false
	}
	if n, ok := obj.(*api.Namespace); ok && n.Status.Phase == "" {
		n.Status.Phase = api.NamespaceActive
		same = false
	}
	return same
}

// Subresource selects what an update writes.
type Subresource string

// Subresources an update may target.
const (
	// SubresourceMain writes everything but the status (of kinds that have
	// one).
	SubresourceMain Subresource = ""
	// SubresourceStatus writes only the status.
	SubresourceStatus Subresource = "status"
)

// Preconditions guard a delete (api.Preconditions).
type Preconditions = api.Preconditions

// CreateCmd builds the command that creates obj. The server has prepared
// obj completely (namespace, name, uid, creationTimestamp, defaults); the
// store only sets resourceVersion and generation.
func CreateCmd(obj api.Object) ([]byte, error) {
	r := api.ResourceOf(obj)
	if r == nil {
		return nil, fmt.Errorf("create %T: %w", obj, ErrUnknownResource)
	}
	// The body is the object as the store will keep it, with a placeholder
	// resourceVersion: Apply then only puts the index in its place instead
	// of encoding the object again. obj itself may be shared; a copy is
	// prepared.
	c := shallowCopy(obj)
	prepareCreate(r, c)
	c.GetObjectMeta().ResourceVersion = rvPlaceholder
	return encodeCreate(r, c)
}

// encodeCreate frames the prepared object c as a create command.
func encodeCreate(r *api.Resource, c api.Object) ([]byte, error) {
	b := make([]byte, 0, cmdSizeHint)
	b = append(b, cmdCreate)
	b = appendString(b, r.Plural)
	b, err := appendJSON(b, c)
	if err != nil {
		return nil, fmt.Errorf("create %s: encode: %w", r.Plural, err)
	}
	return b, nil
}

// cmdSizeHint is the capacity a create or update command starts with: most
// objects encode to less, and the encoder writes straight into it.
const cmdSizeHint = 2048

// UpdateCmd builds the command that replaces obj (sub "") or its status
// (sub "status"). A non-empty obj.ResourceVersion is a precondition.
func UpdateCmd(obj api.Object, sub Subresource) ([]byte, error) {
	r := api.ResourceOf(obj)
	if r == nil {
		return nil, fmt.Errorf("update %T: %w", obj, ErrUnknownResource)
	}
	var sb byte
	switch sub {
	case SubresourceMain:
	case SubresourceStatus:
		sb = 1
	default:
		return nil, fmt.Errorf("update %s: subresource %q: %w", r.Plural, sub, ErrUnknownSubresource)
	}
	body := obj
	if sb == 1 && r.HasStatus {
		// A status write reads only the key, the precondition and the
		// status: the spec is left out so that every server decodes less.
		body = r.New()
		m, om := body.GetObjectMeta(), obj.GetObjectMeta()
		m.Name, m.Namespace, m.ResourceVersion = om.Name, om.Namespace, om.ResourceVersion
		copyStatus(body, obj)
	}
	b := make([]byte, 0, cmdSizeHint)
	b = append(b, cmdUpdate, sb)
	b = appendString(b, r.Plural)
	b, err := appendJSON(b, body)
	if err != nil {
		return nil, fmt.Errorf("update %s: encode: %w", r.Plural, err)
	}
	return b, nil
}

// DeleteCmd builds the command that deletes namespace/name at time now
// (which becomes the deletionTimestamp of objects that have finalizers).
func DeleteCmd(r *api.Resource, namespace, name string, pre Preconditions, now time.Time) []byte {
	b := make([]byte, 0, 1+5*binary.MaxVarintLen64+len(r.Plural)+len(namespace)+len(name)+len(pre.ResourceVersion)+len(pre.UID))
	b = append(b, cmdDelete)
	b = appendString(b, r.Plural)
	b = appendString(b, namespace)
	b = appendString(b, name)
	b = appendString(b, pre.ResourceVersion)
	b = appendString(b, pre.UID)
	return binary.AppendVarint(b, now.UnixNano())
}

// GraceDefault asks DeleteGraceCmd for the pod's own
// terminationGracePeriodSeconds.
const GraceDefault int64 = -1

// DeleteGraceCmd builds a delete with a grace period: a pod bound to a
// node and not finished is marked terminating (deletionTimestamp now +
// grace, deletionGracePeriodSeconds grace) for its agent to stop and then
// remove; grace 0 removes it at once, GraceDefault gives the pod's own
// period. Anything else is deleted as by DeleteCmd.
func DeleteGraceCmd(r *api.Resource, namespace, name string, pre Preconditions, now time.Time, grace int64) []byte {
	b := DeleteCmd(r, namespace, name, pre, now)
	b[0] = cmdDeleteGrace
	return binary.AppendVarint(b, grace)
}

// ExpireEventsCmd builds the command that removes every Event last seen
// before the given time. The leader issues it periodically; see
// Store.OldestEventTime.
func ExpireEventsCmd(before time.Time) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64)
	b = append(b, cmdExpireEvents)
	return binary.AppendVarint(b, before.UnixNano())
}

// BatchCmd packs several commands into one raft entry. Apply runs them in
// order, all at the entry's index, and returns one *Result per command as a
// []*Result. A failed command does not stop the ones after it. Batches do
// not nest.
func BatchCmd(cmds ...[]byte) []byte {
	n := 1 + binary.MaxVarintLen64
	for _, c := range cmds {
		n += binary.MaxVarintLen64 + len(c)
	}
	b := make([]byte, 0, n)
	b = append(b, cmdBatch)
	b = binary.AppendUvarint(b, uint64(len(cmds)))
	for _, c := range cmds {
		b = binary.AppendUvarint(b, uint64(len(c)))
		b = append(b, c...)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// reader takes a command apart without ever reading past its end; the
// first problem sticks in err and every later read returns zero values.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: truncated %s", ErrMalformedCommand, what)
	}
}

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes(what string) []byte {
	n := r.uvarint(what)
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail(what)
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) string(what string) string { return string(r.bytes(what)) }

func (r *reader) byte(what string) byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.fail(what)
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}
