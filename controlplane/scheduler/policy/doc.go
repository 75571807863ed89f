// Package policy reads, checks and describes scheduler policy files
// (SPEC SCH-2): `kind: Policy` in JSON or YAML, in the shape of seed 000
// chapter 14.2, listing the predicates (filters) and priorities (scores) a
// scheduler runs, with weights and the arguments of the configurable ones
// (serviceAffinity, labelsPresence, serviceAntiAffinity, labelPreference).
//
// It is pure data: it knows every name the seed uses, which ones take an
// argument, the order predicates run in and what each one does, but not
// how they are computed; package scheduler builds the plugins from a
// checked Policy. Keeping the file format apart lets `outpost adm
// scheduler policy check FILE` and the server's reload path validate a
// file without building a scheduler.
package policy
