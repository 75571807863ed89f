package api

// Watch event types, as Kubernetes names them.
const (
	Added    = "ADDED"
	Modified = "MODIFIED"
	Deleted  = "DELETED"
	Bookmark = "BOOKMARK"
	Error    = "ERROR"
)

// WatchEvent is one change seen by a watch. Object and Raw are shared with
// the store: do not change them. RV is the resourceVersion to resume after
// this event; for the synthetic ADDED events of an initial listing it is
// the store's index when the watch started (each object's own
// resourceVersion is in its metadata). An ERROR event has no Object: Err
// says why the watch ends (a 410 means relist) and Raw is that Status in
// JSON.
//
// It lives here, not in the store, so that the leader's loops, which see
// the store only through a client, need nothing of the store's package.
type WatchEvent struct {
	Type   string
	Object Object
	Raw    []byte
	RV     uint64
	Err    *StatusError
}

// Preconditions guard a delete: a non-empty field must equal the stored
// object's, or the delete fails with 409 Conflict.
type Preconditions struct {
	ResourceVersion string
	UID             string
}

// DeleteOptions are what a delete may ask, of Kubernetes' DeleteOptions
// the fields outpost acts on.
type DeleteOptions struct {
	Preconditions
	// GracePeriodSeconds, for a pod bound to a node, is how long its
	// containers get to stop before the agent kills them: nil means the
	// pod's own terminationGracePeriodSeconds, 0 removes the object at
	// once without waiting for the node (a force delete).
	GracePeriodSeconds *int64
}
