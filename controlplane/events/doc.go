// Package events records Events the way Kubernetes' event correlator
// does: an event that repeats one already recorded (same involved
// object, reason, message, source and type) within a window does not
// create another Event but raises the count and lastTimestamp of the
// stored one, so a crash loop shows as one line "(x5 over 10m)" in
// `describe` rather than filling the store with copies.
//
// The agent and the control plane's controllers both record through a
// Correlator; each hands it a Sink over its own client. Repeats that come
// faster than MinInterval are counted in memory and written together,
// with the next repeat or by Flush, so that a tight loop costs one raft
// write per interval rather than one per repeat.
package events
