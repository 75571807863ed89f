// Package console tests the web console (issue 15 item 3) end to end: a
// real in-process server with simulated agents (agent/sim), and Debian's
// headless Chromium driven by chromedp, logging in with tokens as a user
// would. It also measures the console's first paint with many nodes and
// pods, and what the console costs the server in memory.
//
// OUTPOST_SCREENSHOTS=1 keeps the screenshots under this directory's
// screenshots/ (another value names the directory); otherwise they go to
// the test's temporary directory. The paths are logged either way.
package console
