// Package console is the web console every server serves at /ui (issue 15
// item 3): static HTML, CSS and JavaScript modules embedded in the binary.
//
// The files are served without authentication because they hold no
// cluster data: the page asks for a bearer token, keeps it in the tab's
// sessionStorage and calls the same API as the CLI with it (lists, then
// watches from the list's resourceVersion, as `get -w` does), so the
// console can show exactly what the token may read and no more.
//
// There is no build step: the modules are written as browsers load them.
// A bundler would bring an npm toolchain into `make build`, a dependency
// tree to audit and a minified blob to review; the console is small
// enough not to need one.
package console
