// Package taints holds the matching rules of taints and tolerations (SPEC
// TNT-2, TNT-3, TNT-4) as plain functions over the API types.
//
// The scheduler uses them to keep pods off nodes; the eviction controller
// and the agent will use the same functions to decide which running pods
// must go and when, so that the three never disagree about what a
// toleration means. The package has no state and imports only the API
// types, so the agent can use it without pulling in the scheduler.
package taints
