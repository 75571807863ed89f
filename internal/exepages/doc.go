// Package exepages gives back the pages of the running executable that
// start-up mapped and the process no longer touches.
//
// One binary holds the server, the agent and the CLI, so an agent maps
// code and read-only data it ran once (package initialisation, flag
// parsing, joining) or never: the kernel maps a whole fault-around window
// (64 KiB) or page-cache folio for each fault, and those pages count in
// the process's RSS for as long as it lives. Trim drops the mappings of
// the executable's read-only segments and asks for single-page faults
// from then on (MADV_RANDOM), so the RSS afterwards holds what the
// process goes on using. The pages stay in the page cache, shared and
// reclaimable; nothing is written and nothing changes for the program.
package exepages
