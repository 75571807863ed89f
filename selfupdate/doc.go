// Package selfupdate lets the outpost binary of a server or an agent
// replace itself (SPEC UPD-6) without a way to strand the host: a new
// binary runs on trial and is kept only once it says it is healthy;
// otherwise the previous good binary comes back on its own, with no
// process of the new one needed for that.
//
// # Layout
//
// Everything is under one directory, DIR (/var/lib/outpost/bin):
//
//	DIR/versions/<sha256 hex>/outpost  every binary kept, named by its digest
//	DIR/current -> versions/<hex>      the binary systemd starts
//	DIR/good    -> versions/<hex>      the last binary marked good
//	DIR/trial.json                     the trial boot in progress (Trial)
//	DIR/last-failure.json              the last trial rolled back (Failure)
//
// The unit starts current, and runs good before every start and after
// every stop:
//
//	ExecStartPre=DIR/good/outpost adm binary check --dir DIR
//	ExecStart=DIR/current/outpost server ...
//	ExecStopPost=DIR/good/outpost adm binary stopped --dir DIR
//	Restart=always
//
// The hooks run the good binary because the one on trial may be unable
// to run at all. systemd resolves DIR/current when it starts the
// service, so a hook that moves the link changes what that start runs.
// The unit's start limit (StartLimitBurst in StartLimitIntervalSec) must
// allow a trial's MaxStarts starts and one more, for the good binary.
//
// # A self-update
//
// The running (good) binary calls Stage with the new binary and its
// digest, then Begin, which records the trial and makes the new binary
// current, and exits. systemd runs check (Check: a start counted), then
// the new binary. Once healthy, the new binary calls MarkGood: good
// follows current and the trial ends. If it exits instead, stopped
// (Stopped) records how, and Check, at the start after MaxStarts starts
// or after the trial's deadline, makes good current again and writes
// last-failure.json; that start runs the good binary. A binary on trial
// that finds itself unhealthy may call Abort and exit, for the same
// outcome at once. Nothing here removes a binary but Prune, and Prune
// keeps current, good and a trial's two binaries: while a trial runs,
// the binary it replaces is there to return to.
//
// # Power cuts
//
// Every change is a rename (a file or symlink written beside its name,
// fsynced, renamed, and the directory fsynced), so a power cut falls
// between two changes. The changes of each operation are ordered so that
// every state in between starts a good binary or a counted trial, and
// Check, run before every start, finishes what was cut short; the
// comments at each order say why. A process that calls these functions
// while another one does (the service, and someone with the CLI) is not
// guarded against.
package selfupdate
