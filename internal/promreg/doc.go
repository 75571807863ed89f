// Package promreg registers Prometheus collectors for parts of outpost
// that are made more than once in one process (a store restarted, the
// leader's loops made again at every term): a second registration shares
// the series of the first instead of failing.
package promreg
