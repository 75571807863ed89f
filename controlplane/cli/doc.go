// Package cli holds outpost's command-line verbs (get, describe, apply,
// create, delete, label, annotate, edit, scale, rollout, taint, cordon,
// uncordon, adm, logs, exec, image import, version) as cobra commands,
// with kubectl's table layouts, messages and error lines, so that people
// who know Kubernetes need not learn a new tool. Shell completion of kinds
// and object names (completion.go), man pages from the commands' help
// (man.go) and the progress line of long operations (progress.go) are
// here too.
//
// The verbs work on the server's raw JSON wherever they write or print an
// object (apply, label, edit, -o json/yaml): a server newer than the CLI
// may send fields this build does not know, and they must survive a
// round trip. Typed objects are used only to render tables and
// descriptions.
//
// cmd/outpost builds the command tree with NewRootCommand, adds the
// server-side subcommands, and runs it with Execute.
package cli
