package selfupdate

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Errors of this package.
var (
	// ErrDigest is content whose sha256 is not the digest it was given
	// with: a download cut short or tampered with, or a damaged file.
	ErrDigest = errors.New("digest mismatch")
	// ErrNotStaged is a trial of a binary that is not under versions/:
	// Stage it first.
	ErrNotStaged = errors.New("binary not staged")
)

// DefaultMaxStarts is how many starts a trial has to be marked good in
// when its MaxStarts is 0.
const DefaultMaxStarts = 3

// Trial is a trial boot in progress: a new binary swapped in as current
// that has not been marked good yet. It is DIR/trial.json.
type Trial struct {
	// Version is the new binary's release version, for messages.
	Version string `json:"version"`
	// Digest is the new binary's, "sha256:<hex>".
	Digest string `json:"digest"`
	// From is the digest of the good binary it replaces, the one a
	// rollback returns to.
	From string `json:"from"`
	// FromVersion is From's release version, for messages.
	FromVersion string `json:"fromVersion,omitempty"`
	// Started is when Begin swapped it in.
	Started time.Time `json:"started"`
	// Deadline is when it must be marked good by: a start after it is
	// the good binary's. Zero: no deadline.
	Deadline time.Time `json:"deadline"`
	// MaxStarts is how many starts it is allowed; DefaultMaxStarts when
	// 0.
	MaxStarts int `json:"maxStarts"`
	// Starts is how many starts Check counted so far, the one it
	// refused included.
	Starts int `json:"starts"`
	// LastExit is how the trial binary last stopped, as Stopped recorded
	// it from systemd, e.g. "exit-code status=1".
	LastExit string `json:"lastExit,omitempty"`
}

// Failure is a trial that was rolled back, and why. It is
// DIR/last-failure.json, kept until ClearFailure so that an updater does
// not try the same binary again and again.
type Failure struct {
	Version     string    `json:"version"`
	Digest      string    `json:"digest"`
	FromVersion string    `json:"fromVersion,omitempty"`
	At          time.Time `json:"at"`
	// Reason is one line for people, e.g. "outpost 1.3.0
	// (sha256:0123456789ab…) did not become healthy in 3 starts, last
	// exit: exit-code status=1".
	Reason string `json:"reason"`
}

// Status is what DIR holds now.
type Status struct {
	// Current and Good are the digests DIR/current and DIR/good point
	// at, "sha256:<hex>", or "" when the link is missing.
	Current string `json:"current"`
	Good    string `json:"good"`
	// Trial is the trial boot in progress, if any.
	Trial *Trial `json:"trial,omitempty"`
	// Failure is the last trial rolled back, if any.
	Failure *Failure `json:"failure,omitempty"`
}

// Digest returns the digest of what r holds, "sha256:<hex>", the name a
// binary is staged and trusted by.
func Digest(r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", fmt.Errorf("digest: %w", err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// Install puts the binary exe (usually os.Executable()) under DIR/versions
// unless it is there, and on a first install (no DIR/current yet) makes
// it both current and good, so that the systemd unit has a binary to
// start and one to check with. It is idempotent, and returns exe's
// digest.
func Install(dir, exe string) (string, error) {
	f, err := os.Open(exe)
	if err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	defer f.Close()
	d, err := Digest(f)
	if err != nil {
		return "", fmt.Errorf("install: read %s: %w", exe, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", fmt.Errorf("install: read %s: %w", exe, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	if err := Stage(dir, f, d); err != nil {
		return "", fmt.Errorf("install %s: %w", exe, err)
	}
	current, err := readLink(dir, currentLink)
	if err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	if current != "" {
		return d, nil
	}
	hx, _ := parseDigest(d)
	// good before current: a cut between them leaves good alone, which
	// Check (run by good before every start) and another Install
	// complete. current alone would leave ExecStartPre no binary to run.
	if err := setLink(dir, goodLink, hx); err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	if err := setLink(dir, currentLink, hx); err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	return d, nil
}

// Stage writes the binary r holds to DIR/versions/<hex>/outpost, where
// Begin can swap it in, after checking that its sha256 is digest: a
// binary that is not the one asked for is refused with an error wrapping
// ErrDigest and nothing of it is left. A binary already staged with that
// content is not written again.
func Stage(dir string, r io.Reader, digest string) error {
	hx, err := parseDigest(digest)
	if err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	dst := binPath(dir, hx)
	switch got, err := fileDigest(dst); {
	case err == nil && got == digest:
		return nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("stage: %w", err)
	}
	// Written in versions/ and moved into versions/<hex> once verified,
	// so that versions/<hex>/outpost is only ever a whole binary of the
	// right digest (a damaged one is replaced the same way).
	vdir := filepath.Join(dir, versionsDir)
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	tmp, got, err := writeTemp(vdir, hx[:12], r, 0o755)
	if err != nil {
		return fmt.Errorf("stage %s: %w", dst, err)
	}
	if got != digest {
		_ = os.Remove(tmp)
		return fmt.Errorf("stage %s: the binary is %s: %w", dst, got, ErrDigest)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("stage: %w", err)
	}
	for _, d := range []string{vdir, dir} {
		if err := syncDir(d); err != nil {
			_ = os.Remove(tmp)
			return fmt.Errorf("stage: %w", err)
		}
	}
	if err := rename(tmp, dst); err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	return nil
}

// Begin starts a trial boot of the staged binary t.Digest: it records
// the trial and makes the binary current, so that the next start of the
// service runs it. The caller then exits (or restarts the service); the
// new binary calls MarkGood once healthy, and Check rolls it back at a
// start after t.MaxStarts starts or after t.Deadline.
//
// t.From is filled in from DIR/good; Started, Starts and LastExit are
// set here. A binary that is not staged is refused (ErrNotStaged), as is
// a trial while another binary's runs. Begin of the binary on trial
// already, or of the good binary, changes nothing more, so that an
// updater may call it again after a failure.
func Begin(dir string, t Trial, now time.Time) error {
	hx, err := parseDigest(t.Digest)
	if err != nil {
		return fmt.Errorf("begin trial: %w", err)
	}
	bin := binPath(dir, hx)
	switch got, err := fileDigest(bin); {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("begin trial of %s: %s: %w", t.Digest, bin, ErrNotStaged)
	case err != nil:
		return fmt.Errorf("begin trial of %s: %w", t.Digest, err)
	case got != t.Digest:
		return fmt.Errorf("begin trial of %s: %s is %s: %w", t.Digest, bin, got, ErrDigest)
	}
	st, err := Read(dir)
	if err != nil {
		return fmt.Errorf("begin trial of %s: %w", t.Digest, err)
	}
	if st.Good == "" {
		return fmt.Errorf("begin trial of %s: %s has no good binary to return to: run outpost adm binary install", t.Digest, filepath.Join(dir, goodLink))
	}
	if cur := st.Trial; cur != nil && cur.Digest != st.Good {
		// A trial of another binary that never started (its Begin was
		// cut short) is replaced; one that started is not.
		if cur.Digest != t.Digest && (st.Current == cur.Digest || cur.Starts > 0) {
			return fmt.Errorf("begin trial of %s: the trial of %s runs (%s): mark it good or roll it back first",
				t.Digest, cur.Digest, filepath.Join(dir, trialFile))
		}
		switch {
		case cur.Digest != t.Digest:
		case st.Current == t.Digest:
			return nil
		case cur.Starts == 0:
			// An earlier Begin was cut before it swapped the binary in.
			return setLinkOp("begin trial", dir, currentLink, hx)
		default:
			return fmt.Errorf("begin trial of %s: its rollback was cut short, and the next start finishes it: begin it again after", t.Digest)
		}
	}
	if t.Digest == st.Good {
		if st.Current == t.Digest {
			return nil
		}
		return setLinkOp("begin trial", dir, currentLink, hx)
	}
	if t.From == "" {
		t.From = st.Good
	} else if t.From != st.Good {
		return fmt.Errorf("begin trial of %s: it replaces %s, but the good binary is %s", t.Digest, t.From, st.Good)
	}
	if t.MaxStarts <= 0 {
		t.MaxStarts = DefaultMaxStarts
	}
	if !t.Deadline.IsZero() && !t.Deadline.After(now) {
		return fmt.Errorf("begin trial of %s: its deadline %s is not after now", t.Digest, t.Deadline.UTC().Format(time.RFC3339))
	}
	t.Started, t.Starts, t.LastExit = now, 0, ""
	// trial.json before current: a cut between them leaves the good
	// binary current and a trial that never started, which Check drops.
	// The other way round, the new binary would start with nothing to
	// count its starts or roll it back.
	if err := writeJSON(dir, trialFile, t); err != nil {
		return fmt.Errorf("begin trial of %s: %w", t.Digest, err)
	}
	return setLinkOp("begin trial", dir, currentLink, hx)
}

// Check is run before every start of the service (ExecStartPre, by the
// good binary). With no trial it does nothing. Else it counts the start,
// and after t.MaxStarts starts or past t.Deadline it rolls the trial
// back: the good binary is made current, so that it is the one this
// start runs, and the failure recorded. It returns that failure. It also
// completes what a power cut left half done.
func Check(dir string, now time.Time) (rolledBack *Failure, err error) {
	good, current, t, err := readState(dir)
	if err != nil {
		if good == "" || !errors.As(err, new(*trialError)) {
			return nil, fmt.Errorf("check: %w", err)
		}
		// A trial record that cannot be read cannot count starts: the
		// binary on trial, if it is current, is not to be trusted.
		if current == good {
			return nil, removeOp("check", dir, trialFile)
		}
		f := &Failure{Digest: current, At: now,
			Reason: describe("", current) + " was rolled back: the trial record cannot be read: " + err.Error()}
		if err := rollback(dir, good, f); err != nil {
			return nil, fmt.Errorf("check: %w", err)
		}
		return f, nil
	}
	if t == nil {
		if current == "" && good != "" {
			// A first Install cut before it made good current.
			hx, _ := parseDigest(good)
			return nil, setLinkOp("check", dir, currentLink, hx)
		}
		return nil, nil
	}
	if good == "" {
		return nil, fmt.Errorf("check: the trial of %s runs, but %s is missing: there is nothing to roll back to", t.Digest, filepath.Join(dir, goodLink))
	}
	switch {
	case good == t.Digest:
		// MarkGood was cut after it moved good: the trial is over.
		return nil, removeOp("check", dir, trialFile)
	case current != t.Digest && t.Starts == 0:
		// Begin was cut before it swapped the binary in: the trial
		// never started, and whoever began it begins it again.
		return nil, removeOp("check", dir, trialFile)
	case current != t.Digest:
		// A rollback was cut after it made good current: finish it,
		// with the failure it recorded if it got that far.
		why := "was rolled back after " + pluralStarts(t.Starts) + " counted (the rollback was cut short, and its reason lost)"
		if t.LastExit != "" {
			why += ", last exit: " + t.LastExit
		}
		f := failureOf(t, now, why)
		var last Failure
		ok, err := readJSON(dir, failureFile, &last)
		if err == nil && ok && last.Digest == t.Digest && !last.At.Before(t.Started) {
			f = &last
		}
		if err := rollback(dir, good, f); err != nil {
			return nil, fmt.Errorf("check: %w", err)
		}
		return f, nil
	}
	// Counted and saved before any rollback: a rollback cut short then
	// has a start on record, which tells it from a Begin cut short.
	t.Starts++
	if err := writeJSON(dir, trialFile, t); err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	var why string
	switch {
	case !t.Deadline.IsZero() && now.After(t.Deadline):
		why = "did not become healthy: not healthy by its deadline " + t.Deadline.UTC().Format(time.RFC3339)
	case t.Starts > maxStarts(t):
		// The start counted last is the good binary's.
		why = "did not become healthy in " + pluralStarts(t.Starts-1)
	default:
		return nil, nil
	}
	if t.LastExit != "" {
		why += ", last exit: " + t.LastExit
	}
	f := failureOf(t, now, why)
	if err := rollback(dir, good, f); err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	return f, nil
}

// Stopped records how the binary on trial stopped, from what systemd
// gives ExecStopPost ($SERVICE_RESULT, $EXIT_CODE, $EXIT_STATUS), for the
// failure's reason should Check roll it back. Without a trial, or for the
// stop of a binary not on trial (the one that called Begin), it does
// nothing.
func Stopped(dir, serviceResult, exitCode, exitStatus string) error {
	good, current, t, err := readState(dir)
	if err != nil {
		return fmt.Errorf("record stop: %w", err)
	}
	// Starts == 0: the binary on trial never started; what stopped is
	// the one that began the trial.
	if t == nil || t.Digest == good || t.Digest != current || t.Starts == 0 {
		return nil
	}
	exit := formatExit(serviceResult, exitCode, exitStatus)
	if exit == "" {
		return nil
	}
	t.LastExit = exit
	if err := writeJSON(dir, trialFile, t); err != nil {
		return fmt.Errorf("record stop: %w", err)
	}
	return nil
}

// formatExit is systemd's account of an exit in one short phrase:
// "exit-code status=1", "signal killed status=SEGV".
func formatExit(serviceResult, exitCode, exitStatus string) string {
	var parts []string
	if serviceResult != "" {
		parts = append(parts, serviceResult)
	}
	if exitCode != "" && exitCode != "exited" {
		parts = append(parts, exitCode)
	}
	if exitStatus != "" {
		parts = append(parts, "status="+exitStatus)
	}
	return strings.Join(parts, " ")
}

// MarkGood ends the trial in success: the binary on trial becomes the
// good one, which checks every start from now on and which a later trial
// returns to. Without a trial it does nothing; a trial whose binary is not
// current (rolled back, or never swapped in) is refused.
func MarkGood(dir string) error {
	good, current, t, err := readState(dir)
	if err != nil {
		return fmt.Errorf("mark good: %w", err)
	}
	switch {
	case t == nil:
		return nil
	case good == t.Digest:
		return removeOp("mark good", dir, trialFile)
	case current != t.Digest:
		return fmt.Errorf("mark %s good: it is not current (%s is): it was rolled back, or never swapped in", t.Digest, current)
	}
	hx, _ := parseDigest(t.Digest)
	// good before trial.json goes: a cut between them leaves a trial
	// whose binary is good, which Check and MarkGood recognise as done.
	// The other way round, the good binary would be the old one with no
	// trial left to say otherwise, and the next trial would return to it.
	if err := setLinkOp("mark good", dir, goodLink, hx); err != nil {
		return err
	}
	return removeOp("mark good", dir, trialFile)
}

// Abort ends the trial in failure when the binary on trial decides so
// itself (not healthy in time, say): the good binary is made current and
// the failure recorded with reason, as Check does. reason is the
// Failure's whole Reason, so it should name the binary; "" records
// "outpost <version> (<digest>) failed its trial". The caller then exits,
// and systemd starts the good binary. Without a trial it does nothing.
func Abort(dir, reason string, now time.Time) error {
	good, _, t, err := readState(dir)
	if err != nil {
		return fmt.Errorf("roll back: %w", err)
	}
	switch {
	case t == nil:
		return nil
	case good == "":
		return fmt.Errorf("roll back %s: %s is missing: there is nothing to roll back to", t.Digest, filepath.Join(dir, goodLink))
	case good == t.Digest:
		return fmt.Errorf("roll back %s: it was marked good already", t.Digest)
	}
	f := failureOf(t, now, "failed its trial")
	if reason != "" {
		f.Reason = reason
	}
	if err := rollback(dir, good, f); err != nil {
		return fmt.Errorf("roll back: %w", err)
	}
	return nil
}

// Read returns what DIR holds now. A DIR that does not exist holds
// nothing: the zero Status.
func Read(dir string) (Status, error) {
	good, current, t, err := readState(dir)
	if err != nil {
		return Status{}, err
	}
	st := Status{Current: current, Good: good, Trial: t}
	var f Failure
	ok, err := readJSON(dir, failureFile, &f)
	if err != nil {
		return Status{}, err
	}
	if ok {
		st.Failure = &f
	}
	return st, nil
}

// Prune removes the binaries under versions/ other than the current, the
// good and the trial's, and files a Stage cut short left there, to free
// the disk. Not to be run while a Stage writes.
func Prune(dir string) error {
	st, err := Read(dir)
	if err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	if st.Current == "" && st.Good == "" {
		return fmt.Errorf("prune %s: neither current nor good is there to keep", dir)
	}
	keep := map[string]bool{st.Current: true, st.Good: true}
	if st.Trial != nil {
		keep[st.Trial.Digest], keep[st.Trial.From] = true, true
	}
	vdir := filepath.Join(dir, versionsDir)
	ents, err := os.ReadDir(vdir)
	if err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		switch {
		case isHex64(name) && keep["sha256:"+name]:
			continue
		case !isHex64(name) && !strings.HasPrefix(name, tempPrefix):
			continue // not ours
		}
		if err := os.RemoveAll(filepath.Join(vdir, name)); err != nil {
			return fmt.Errorf("prune: %w", err)
		}
	}
	if err := syncDir(vdir); err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	return nil
}

// ClearFailure forgets the last failure, so that an updater that holds
// back a binary that failed its trial tries it again.
func ClearFailure(dir string) error {
	return removeOp("clear failure", dir, failureFile)
}

// trialError is a trial.json that cannot be read.
type trialError struct{ err error }

func (e *trialError) Error() string { return e.err.Error() }
func (e *trialError) Unwrap() error { return e.err }

// readState reads the links and the trial. When only the trial cannot be
// read (a *trialError), good and current are returned with the error.
func readState(dir string) (good, current string, t *Trial, err error) {
	if good, err = readLink(dir, goodLink); err != nil {
		return "", "", nil, err
	}
	if current, err = readLink(dir, currentLink); err != nil {
		return "", "", nil, err
	}
	var tr Trial
	ok, err := readJSON(dir, trialFile, &tr)
	if err != nil {
		return good, current, nil, &trialError{err}
	}
	if !ok {
		return good, current, nil, nil
	}
	if _, err := parseDigest(tr.Digest); err != nil {
		return good, current, nil, &trialError{fmt.Errorf("%s: %w", filepath.Join(dir, trialFile), err)}
	}
	return good, current, &tr, nil
}

// rollback makes the good binary current, records f (when it names a
// digest) and ends the trial.
func rollback(dir, good string, f *Failure) error {
	hx, err := parseDigest(good)
	if err != nil {
		return err
	}
	// current first: from then on every start runs the good binary,
	// whatever a cut leaves undone. trial.json goes last: while it is
	// there, with a start counted and a binary that is not current,
	// Check knows a rollback was cut short and finishes it.
	if err := setLink(dir, currentLink, hx); err != nil {
		return err
	}
	if err := writeJSON(dir, failureFile, f); err != nil {
		return err
	}
	return remove(dir, trialFile)
}

func failureOf(t *Trial, now time.Time, why string) *Failure {
	return &Failure{Version: t.Version, Digest: t.Digest, FromVersion: t.FromVersion, At: now,
		Reason: describe(t.Version, t.Digest) + " " + why}
}

// describe names a binary for people: "outpost 1.3.0 (sha256:0123456789ab…)".
func describe(version, digest string) string {
	short := digest
	if hx, err := parseDigest(digest); err == nil {
		short = "sha256:" + hx[:12] + "…"
	}
	if version == "" {
		return "outpost (" + short + ")"
	}
	return "outpost " + version + " (" + short + ")"
}

func pluralStarts(n int) string {
	if n == 1 {
		return "1 start"
	}
	return fmt.Sprintf("%d starts", n)
}

func maxStarts(t *Trial) int {
	if t.MaxStarts <= 0 {
		return DefaultMaxStarts
	}
	return t.MaxStarts
}

func setLinkOp(op, dir, name, hx string) error {
	if err := setLink(dir, name, hx); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

func removeOp(op, dir, name string) error {
	if err := remove(dir, name); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// Running returns nil when this process runs DIR/current/outpost, so a
// Begin in dir changes what its next start runs; else why not (the
// process was started from elsewhere: it cannot replace its binary).
func Running(dir string) error {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return fmt.Errorf("its executable: %w", err)
	}
	cur, err := filepath.EvalSymlinks(filepath.Join(dir, "current", "outpost"))
	if err != nil {
		return fmt.Errorf("%s has no current binary (outpost adm binary install --dir %s)", dir, dir)
	}
	if cur != exe {
		return fmt.Errorf("it runs %s, not %s/current/outpost (the unit's ExecStart must)", exe, dir)
	}
	return nil
}
