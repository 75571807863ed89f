package selfupdate

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// t0 is the clock of these tests.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func digestOf(content string) string {
	sum := sha256.Sum256([]byte(content))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// installed returns a DIR with the binary "v1" installed, and its digest.
func installed(t *testing.T) (dir, v1 string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "bin")
	exe := filepath.Join(t.TempDir(), "outpost")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\necho v1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := Install(dir, exe)
	if err != nil {
		t.Fatal(err)
	}
	return dir, d
}

// staged stages a binary holding content and returns its digest.
func staged(t *testing.T, dir, content string) string {
	t.Helper()
	d := digestOf(content)
	if err := Stage(dir, strings.NewReader(content), d); err != nil {
		t.Fatal(err)
	}
	return d
}

func status(t *testing.T, dir string) Status {
	t.Helper()
	st, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// startable fails t unless systemd could run the unit: DIR/good/outpost
// for the hooks and DIR/current/outpost for the service.
func startable(t *testing.T, dir string) {
	t.Helper()
	for _, l := range []string{goodLink, currentLink} {
		p := filepath.Join(dir, l, binaryName)
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o755 {
			t.Fatalf("%s is not a binary to run: %v %v", p, fi, err)
		}
	}
}

func mustCheck(t *testing.T, dir string, now time.Time) *Failure {
	t.Helper()
	f, err := Check(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestDigest(t *testing.T) {
	d, err := Digest(strings.NewReader(""))
	if err != nil || d != "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("Digest(\"\") = %q, %v", d, err)
	}
}

func TestStageRefusesAWrongBinaryAndLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	want := digestOf("the real one")
	err := Stage(dir, strings.NewReader("tampered"), want)
	if !errors.Is(err, ErrDigest) {
		t.Fatalf("Stage: %v, want ErrDigest", err)
	}
	if !strings.Contains(err.Error(), filepath.Join(dir, versionsDir)) {
		t.Errorf("error does not name the path: %v", err)
	}
	ents, err := os.ReadDir(filepath.Join(dir, versionsDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
	for _, bad := range []string{"", "sha256:abc", "md5:" + strings.Repeat("0", 64), "sha256:" + strings.Repeat("A", 64)} {
		if err := Stage(dir, strings.NewReader("x"), bad); err == nil {
			t.Errorf("Stage with digest %q: no error", bad)
		}
	}
}

func TestStageIsANoOpForTheSameBinaryAndMendsADamagedOne(t *testing.T) {
	dir := t.TempDir()
	d := staged(t, dir, "v2")
	p := filepath.Join(dir, versionsDir, strings.TrimPrefix(d, "sha256:"), binaryName)
	before, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if before.Mode().Perm() != 0o755 {
		t.Errorf("mode %v, want 0755", before.Mode())
	}
	staged(t, dir, "v2")
	after, err := os.Stat(p)
	if err != nil || !os.SameFile(before, after) {
		t.Fatalf("staging the same binary again rewrote it (%v)", err)
	}
	if err := os.WriteFile(p, []byte("damaged"), 0o755); err != nil {
		t.Fatal(err)
	}
	staged(t, dir, "v2")
	if got, err := fileDigest(p); err != nil || got != d {
		t.Fatalf("a damaged binary was not replaced: %s, %v", got, err)
	}
}

func TestInstallIsIdempotent(t *testing.T) {
	dir, v1 := installed(t)
	hx := strings.TrimPrefix(v1, "sha256:")
	for _, l := range []string{currentLink, goodLink} {
		target, err := os.Readlink(filepath.Join(dir, l))
		if err != nil || target != filepath.Join(versionsDir, hx) {
			t.Fatalf("%s -> %q (%v), want the relative versions/%s", l, target, err, hx)
		}
	}
	startable(t, dir)
	exe := filepath.Join(dir, currentLink, binaryName)
	if d, err := Install(dir, exe); err != nil || d != v1 {
		t.Fatalf("second Install = %s, %v", d, err)
	}
	// Another binary is staged, not made current: that is Begin's.
	other := filepath.Join(t.TempDir(), "outpost")
	if err := os.WriteFile(other, []byte("v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	d2, err := Install(dir, other)
	if err != nil || d2 != digestOf("v2") {
		t.Fatalf("Install v2 = %s, %v", d2, err)
	}
	if st := status(t, dir); st.Current != v1 || st.Good != v1 || st.Trial != nil || st.Failure != nil {
		t.Fatalf("status after installs: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(dir, versionsDir, strings.TrimPrefix(d2, "sha256:"), binaryName)); err != nil {
		t.Fatal(err)
	}
}

func TestBeginRefuses(t *testing.T) {
	dir, v1 := installed(t)
	missing := digestOf("not staged")
	if err := Begin(dir, Trial{Digest: missing}, t0); !errors.Is(err, ErrNotStaged) {
		t.Fatalf("Begin of a binary not staged: %v", err)
	}
	v2 := staged(t, dir, "v2")
	if err := Begin(dir, Trial{Digest: v2, From: digestOf("other")}, t0); err == nil {
		t.Fatal("Begin from a binary that is not good: no error")
	}
	if err := Begin(dir, Trial{Digest: v2, Deadline: t0}, t0); err == nil {
		t.Fatal("Begin with a deadline passed: no error")
	}
	bare := t.TempDir()
	staged(t, bare, "v2")
	if err := Begin(bare, Trial{Digest: v2}, t0); err == nil || !strings.Contains(err.Error(), "install") {
		t.Fatalf("Begin without an install: %v", err)
	}
	if err := Begin(dir, Trial{Version: "2", Digest: v2}, t0); err != nil {
		t.Fatal(err)
	}
	st := status(t, dir)
	if st.Current != v2 || st.Good != v1 || st.Trial == nil {
		t.Fatalf("after Begin: %+v", st)
	}
	if tr := *st.Trial; tr.From != v1 || tr.MaxStarts != DefaultMaxStarts || tr.Starts != 0 || !tr.Started.Equal(t0) {
		t.Fatalf("trial: %+v", tr)
	}
	v3 := staged(t, dir, "v3")
	if err := Begin(dir, Trial{Digest: v3}, t0); err == nil || !strings.Contains(err.Error(), v2) {
		t.Fatalf("Begin while another trial runs: %v", err)
	}
	// Again for the same binary: nothing changes, not even the count.
	mustCheck(t, dir, t0)
	if err := Begin(dir, Trial{Digest: v2, MaxStarts: 9}, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if tr := status(t, dir).Trial; tr.Starts != 1 || tr.MaxStarts != DefaultMaxStarts {
		t.Fatalf("Begin again reset the trial: %+v", tr)
	}
	// A staged binary damaged since is refused too.
	p := filepath.Join(dir, versionsDir, strings.TrimPrefix(v3, "sha256:"), binaryName)
	if err := os.WriteFile(p, []byte("damaged"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := MarkGood(dir); err != nil {
		t.Fatal(err)
	}
	if err := Begin(dir, Trial{Digest: v3}, t0); !errors.Is(err, ErrDigest) {
		t.Fatalf("Begin of a damaged binary: %v", err)
	}
}

func TestCheckRollsBackAfterMaxStarts(t *testing.T) {
	dir, v1 := installed(t)
	v2 := staged(t, dir, "v2")
	if err := Begin(dir, Trial{Version: "v2", Digest: v2, FromVersion: "v1"}, t0); err != nil {
		t.Fatal(err)
	}
	// The stop of v1, which began the trial, is not the trial's.
	if err := Stopped(dir, "success", "exited", "0"); err != nil {
		t.Fatal(err)
	}
	if tr := status(t, dir).Trial; tr.LastExit != "" {
		t.Fatalf("the stop of the binary that began the trial was recorded: %q", tr.LastExit)
	}
	for i := 1; i <= 3; i++ {
		if f := mustCheck(t, dir, t0.Add(time.Duration(i)*time.Second)); f != nil {
			t.Fatalf("start %d rolled back: %+v", i, f)
		}
		st := status(t, dir)
		if st.Current != v2 || st.Trial == nil || st.Trial.Starts != i {
			t.Fatalf("after start %d: %+v %+v", i, st, st.Trial)
		}
		if err := Stopped(dir, "exit-code", "exited", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
		startable(t, dir)
	}
	now := t0.Add(time.Minute)
	f := mustCheck(t, dir, now)
	if f == nil {
		t.Fatal("the 4th start did not roll back")
	}
	want := "outpost v2 (" + v2[:19] + "…) did not become healthy in 3 starts, last exit: exit-code status=3"
	if f.Reason != want || f.Digest != v2 || f.Version != "v2" || f.FromVersion != "v1" || !f.At.Equal(now) {
		t.Fatalf("failure: %+v\nwant reason %q", f, want)
	}
	st := status(t, dir)
	if st.Current != v1 || st.Good != v1 || st.Trial != nil || st.Failure == nil || *st.Failure != *f {
		t.Fatalf("after the rollback: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(dir, trialFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("trial.json is still there: %v", err)
	}
	startable(t, dir)
	if f := mustCheck(t, dir, now); f != nil {
		t.Fatalf("a start without a trial rolled back: %+v", f)
	}
	if err := Stopped(dir, "exit-code", "exited", "1"); err != nil {
		t.Fatal(err)
	}
	if err := ClearFailure(dir); err != nil {
		t.Fatal(err)
	}
	if st := status(t, dir); st.Failure != nil {
		t.Fatalf("failure not cleared: %+v", st.Failure)
	}
	if err := ClearFailure(dir); err != nil {
		t.Fatal(err)
	}
}

func TestCheckRollsBackAfterTheDeadline(t *testing.T) {
	dir, v1 := installed(t)
	v2 := staged(t, dir, "v2")
	deadline := t0.Add(10 * time.Minute)
	if err := Begin(dir, Trial{Version: "v2", Digest: v2, Deadline: deadline, MaxStarts: 100}, t0); err != nil {
		t.Fatal(err)
	}
	if f := mustCheck(t, dir, t0.Add(time.Minute)); f != nil {
		t.Fatalf("rolled back before the deadline: %+v", f)
	}
	if err := Stopped(dir, "signal", "killed", "SEGV"); err != nil {
		t.Fatal(err)
	}
	if f := mustCheck(t, dir, deadline); f != nil {
		t.Fatalf("rolled back at the deadline: %+v", f)
	}
	f := mustCheck(t, dir, deadline.Add(time.Second))
	want := "did not become healthy: not healthy by its deadline 2026-03-01T12:10:00Z, last exit: signal killed status=SEGV"
	if f == nil || !strings.HasSuffix(f.Reason, want) {
		t.Fatalf("failure %+v, want a reason ending %q", f, want)
	}
	if st := status(t, dir); st.Current != v1 || st.Trial != nil {
		t.Fatalf("after the rollback: %+v", st)
	}
}

func TestMarkGood(t *testing.T) {
	dir, v1 := installed(t)
	if err := MarkGood(dir); err != nil {
		t.Fatalf("MarkGood without a trial: %v", err)
	}
	v2 := staged(t, dir, "v2")
	if err := Begin(dir, Trial{Digest: v2}, t0); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, dir, t0)
	if err := MarkGood(dir); err != nil {
		t.Fatal(err)
	}
	st := status(t, dir)
	if st.Current != v2 || st.Good != v2 || st.Trial != nil || st.Failure != nil {
		t.Fatalf("after MarkGood: %+v", st)
	}
	startable(t, dir)
	for range 5 {
		if f := mustCheck(t, dir, t0.Add(time.Hour)); f != nil {
			t.Fatalf("a good binary was rolled back: %+v", f)
		}
	}
	if err := MarkGood(dir); err != nil {
		t.Fatal(err)
	}
	// The binary it replaced is still there until Prune.
	if _, err := os.Stat(filepath.Join(dir, versionsDir, strings.TrimPrefix(v1, "sha256:"), binaryName)); err != nil {
		t.Fatal(err)
	}
}

func TestMarkGoodRefusesATrialNotCurrent(t *testing.T) {
	dir, v1 := installed(t)
	v2 := staged(t, dir, "v2")
	if err := Begin(dir, Trial{Digest: v2}, t0); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, dir, t0)
	if err := setLink(dir, currentLink, strings.TrimPrefix(v1, "sha256:")); err != nil {
		t.Fatal(err)
	}
	if err := MarkGood(dir); err == nil {
		t.Fatal("MarkGood of a trial whose binary is not current: no error")
	}
	if st := status(t, dir); st.Good != v1 {
		t.Fatalf("good moved: %+v", st)
	}
}

func TestAbort(t *testing.T) {
	dir, v1 := installed(t)
	if err := Abort(dir, "no trial", t0); err != nil {
		t.Fatalf("Abort without a trial: %v", err)
	}
	v2 := staged(t, dir, "v2")
	if err := Begin(dir, Trial{Version: "v2", Digest: v2}, t0); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, dir, t0)
	if err := Abort(dir, "outpost v2 was not healthy in 5m0s", t0.Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	st := status(t, dir)
	if st.Current != v1 || st.Good != v1 || st.Trial != nil || st.Failure == nil {
		t.Fatalf("after Abort: %+v", st)
	}
	if want := "outpost v2 was not healthy in 5m0s"; st.Failure.Reason != want || st.Failure.Digest != v2 || st.Failure.Version != "v2" {
		t.Fatalf("failure %+v, want reason %q", st.Failure, want)
	}
	startable(t, dir)
	if f := mustCheck(t, dir, t0.Add(6*time.Minute)); f != nil {
		t.Fatalf("Check after Abort: %+v", f)
	}
	// Without a reason, one naming the binary.
	if err := Begin(dir, Trial{Version: "v2", Digest: v2}, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := Abort(dir, "", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if want := "outpost v2 (" + v2[:19] + "…) failed its trial"; status(t, dir).Failure.Reason != want {
		t.Fatalf("reason %q, want %q", status(t, dir).Failure.Reason, want)
	}
}

func TestPruneKeepsCurrentGoodAndTheTrial(t *testing.T) {
	if err := Prune(t.TempDir()); err == nil {
		t.Fatal("Prune of a DIR without binaries: no error")
	}
	dir, v1 := installed(t)
	v2 := staged(t, dir, "v2")
	v3 := staged(t, dir, "v3")
	vdir := filepath.Join(dir, versionsDir)
	leftover := filepath.Join(vdir, tempPrefix+"cut-short")
	notOurs := filepath.Join(vdir, "README")
	for _, p := range []string{leftover, notOurs} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := Begin(dir, Trial{Digest: v2}, t0); err != nil {
		t.Fatal(err)
	}
	if err := Prune(dir); err != nil {
		t.Fatal(err)
	}
	has := func(d string) bool {
		_, err := os.Stat(filepath.Join(vdir, strings.TrimPrefix(d, "sha256:"), binaryName))
		return err == nil
	}
	if !has(v1) || !has(v2) || has(v3) {
		t.Fatalf("after Prune: v1 %v, v2 %v, v3 %v; want v1 and v2 only", has(v1), has(v2), has(v3))
	}
	if _, err := os.Stat(leftover); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a cut-short stage was kept: %v", err)
	}
	if _, err := os.Stat(notOurs); err != nil {
		t.Errorf("a file not ours was removed: %v", err)
	}
	startable(t, dir)
}

func TestReadAndHooksOfAMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nothing")
	if st, err := Read(dir); err != nil || st != (Status{}) {
		t.Fatalf("Read = %+v, %v", st, err)
	}
	if f, err := Check(dir, t0); f != nil || err != nil {
		t.Fatalf("Check = %+v, %v", f, err)
	}
	for name, err := range map[string]error{
		"Stopped": Stopped(dir, "exit-code", "exited", "1"), "MarkGood": MarkGood(dir),
		"Abort": Abort(dir, "x", t0), "ClearFailure": ClearFailure(dir),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a hook made %s: %v", dir, err)
	}
}

func TestReadRefusesALinkElsewhere(t *testing.T) {
	dir, _ := installed(t)
	if err := os.Remove(filepath.Join(dir, currentLink)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/bin", filepath.Join(dir, currentLink)); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, currentLink)) {
		t.Fatalf("Read of a link elsewhere: %v", err)
	}
}

func TestCheckRollsBackAnUnreadableTrial(t *testing.T) {
	dir, v1 := installed(t)
	v2 := staged(t, dir, "v2")
	if err := Begin(dir, Trial{Digest: v2}, t0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, trialFile), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := mustCheck(t, dir, t0)
	if f == nil || f.Digest != v2 || !strings.Contains(f.Reason, "cannot be read") {
		t.Fatalf("failure: %+v", f)
	}
	if st := status(t, dir); st.Current != v1 || st.Trial != nil {
		t.Fatalf("after Check: %+v", st)
	}
}

func TestFormatExit(t *testing.T) {
	for _, c := range []struct{ result, code, status, want string }{
		{"exit-code", "exited", "1", "exit-code status=1"},
		{"signal", "killed", "SEGV", "signal killed status=SEGV"},
		{"core-dump", "dumped", "ABRT", "core-dump dumped status=ABRT"},
		{"timeout", "", "", "timeout"},
		{"", "", "", ""},
	} {
		if got := formatExit(c.result, c.code, c.status); got != c.want {
			t.Errorf("formatExit(%q, %q, %q) = %q, want %q", c.result, c.code, c.status, got, c.want)
		}
	}
}

// Hand-made states a power cut leaves between two steps: each must
// start a good binary, or the trial counted, and the next Check must
// leave it consistent.
func TestCheckFinishesWhatACutLeft(t *testing.T) {
	t.Run("Begin cut before it swapped the binary in", func(t *testing.T) {
		dir, v1 := installed(t)
		v2 := staged(t, dir, "v2")
		if err := writeJSON(dir, trialFile, Trial{Digest: v2, From: v1, MaxStarts: 3, Started: t0}); err != nil {
			t.Fatal(err)
		}
		startable(t, dir)
		if f := mustCheck(t, dir, t0); f != nil {
			t.Fatalf("a trial that never started was recorded as failed: %+v", f)
		}
		if st := status(t, dir); st.Current != v1 || st.Good != v1 || st.Trial != nil || st.Failure != nil {
			t.Fatalf("after Check: %+v", st)
		}
		if err := Begin(dir, Trial{Digest: v2}, t0); err != nil {
			t.Fatalf("Begin again: %v", err)
		}
	})
	t.Run("Begin cut, then begun again", func(t *testing.T) {
		dir, v1 := installed(t)
		v2 := staged(t, dir, "v2")
		if err := writeJSON(dir, trialFile, Trial{Digest: v2, From: v1, MaxStarts: 3, Started: t0}); err != nil {
			t.Fatal(err)
		}
		if err := Begin(dir, Trial{Digest: v2}, t0); err != nil {
			t.Fatal(err)
		}
		if st := status(t, dir); st.Current != v2 || st.Trial == nil {
			t.Fatalf("after Begin: %+v", st)
		}
	})
	t.Run("rollback cut after current went back", func(t *testing.T) {
		dir, v1 := installed(t)
		v2 := staged(t, dir, "v2")
		tr := Trial{Version: "v2", Digest: v2, From: v1, MaxStarts: 3, Starts: 4, Started: t0, LastExit: "exit-code status=1"}
		if err := writeJSON(dir, trialFile, tr); err != nil {
			t.Fatal(err)
		}
		startable(t, dir)
		f := mustCheck(t, dir, t0.Add(time.Minute))
		if f == nil || f.Digest != v2 || !strings.Contains(f.Reason, "last exit: exit-code status=1") {
			t.Fatalf("failure: %+v", f)
		}
		if st := status(t, dir); st.Current != v1 || st.Trial != nil || st.Failure == nil || *st.Failure != *f {
			t.Fatalf("after Check: %+v", st)
		}
	})
	t.Run("rollback cut after the failure was written", func(t *testing.T) {
		dir, v1 := installed(t)
		v2 := staged(t, dir, "v2")
		tr := Trial{Version: "v2", Digest: v2, From: v1, MaxStarts: 3, Starts: 1, Started: t0}
		recorded := Failure{Version: "v2", Digest: v2, At: t0.Add(time.Minute), Reason: "outpost v2 failed its trial: the reason Abort gave"}
		if err := writeJSON(dir, trialFile, tr); err != nil {
			t.Fatal(err)
		}
		if err := writeJSON(dir, failureFile, recorded); err != nil {
			t.Fatal(err)
		}
		f := mustCheck(t, dir, t0.Add(2*time.Minute))
		if f == nil || *f != recorded {
			t.Fatalf("failure %+v, want the one recorded, %+v", f, recorded)
		}
		if st := status(t, dir); st.Current != v1 || st.Trial != nil || *st.Failure != recorded {
			t.Fatalf("after Check: %+v", st)
		}
	})
	t.Run("MarkGood cut after good moved", func(t *testing.T) {
		dir, _ := installed(t)
		v2 := staged(t, dir, "v2")
		if err := Begin(dir, Trial{Digest: v2}, t0); err != nil {
			t.Fatal(err)
		}
		mustCheck(t, dir, t0)
		if err := setLink(dir, goodLink, strings.TrimPrefix(v2, "sha256:")); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if f := mustCheck(t, dir, t0.Add(time.Duration(i)*time.Hour)); f != nil {
				t.Fatalf("a binary marked good was rolled back: %+v", f)
			}
		}
		if st := status(t, dir); st.Current != v2 || st.Good != v2 || st.Trial != nil || st.Failure != nil {
			t.Fatalf("after Check: %+v", st)
		}
	})
	t.Run("first Install cut before current", func(t *testing.T) {
		dir, v1 := installed(t)
		if err := os.Remove(filepath.Join(dir, currentLink)); err != nil {
			t.Fatal(err)
		}
		if f := mustCheck(t, dir, t0); f != nil {
			t.Fatalf("Check: %+v", f)
		}
		if st := status(t, dir); st.Current != v1 || st.Good != v1 {
			t.Fatalf("after Check: %+v", st)
		}
		startable(t, dir)
	})
}

// crashAt makes the step-th change (from 0) fail, as a power cut just
// before it would, and every change after it: the process is gone.
// It returns how many changes were asked for.
func crashAt(t *testing.T, step int) *int {
	t.Helper()
	n := new(int)
	prev := beforeChange
	t.Cleanup(func() { beforeChange = prev })
	beforeChange = func(p string) error {
		defer func() { *n++ }()
		if step >= 0 && *n >= step {
			return fmt.Errorf("power cut before changing %s", p)
		}
		return nil
	}
	return n
}

// Every operation is cut short before each of its changes in turn, and
// the host is then started over and over as systemd would (Check, the
// binary fails, Stopped), never marked good again: the service must
// always have a good binary to check with and one to start, the good one
// must never be a binary that was not marked good, and the host must end
// on the good binary with no trial.
func TestACutAtAnyStepStillStartsAGoodBinary(t *testing.T) {
	ops := []struct {
		name string
		// setup is the state before op; it returns the binaries that
		// may be good after the cut.
		setup func(t *testing.T, dir string) []string
		op    func(dir string) error
		// failure is whether the host must end with the trial's
		// failure recorded ("yes"), without one ("no"), or either.
		failure string
	}{
		{"Install", func(t *testing.T, dir string) []string {
			// "": cut before good, nothing is installed yet (and the
			// installer fails).
			return []string{"", digestOf("v1")}
		}, func(dir string) error {
			exe := filepath.Join(filepath.Dir(dir), "exe")
			if err := os.WriteFile(exe, []byte("v1"), 0o755); err != nil {
				return err
			}
			_, err := Install(dir, exe)
			return err
		}, "no"},
		{"Begin", func(t *testing.T, dir string) []string {
			v1 := installV1(t, dir)
			staged(t, dir, "v2")
			return []string{v1}
		}, func(dir string) error {
			return Begin(dir, Trial{Version: "v2", Digest: digestOf("v2")}, t0)
		}, "no"},
		{"Check rolling back", func(t *testing.T, dir string) []string {
			v1 := installV1(t, dir)
			beginV2(t, dir, 3)
			return []string{v1}
		}, func(dir string) error {
			_, err := Check(dir, t0.Add(time.Hour))
			return err
		}, "yes"},
		{"Check rolling back at the first start", func(t *testing.T, dir string) []string {
			v1 := installV1(t, dir)
			beginV2(t, dir, 0)
			return []string{v1}
		}, func(dir string) error {
			_, err := Check(dir, t0.Add(time.Hour))
			return err
		}, "yes"},
		{"Abort", func(t *testing.T, dir string) []string {
			v1 := installV1(t, dir)
			beginV2(t, dir, 1)
			return []string{v1}
		}, func(dir string) error {
			return Abort(dir, "unhealthy", t0.Add(time.Minute))
		}, "yes"},
		{"MarkGood", func(t *testing.T, dir string) []string {
			v1 := installV1(t, dir)
			beginV2(t, dir, 1)
			return []string{v1, digestOf("v2")}
		}, func(dir string) error { return MarkGood(dir) }, ""},
	}
	for _, o := range ops {
		t.Run(o.name, func(t *testing.T) {
			// Count the changes of an uncut run.
			dir := filepath.Join(t.TempDir(), "bin")
			o.setup(t, dir)
			n := crashAt(t, -1)
			if err := o.op(dir); err != nil {
				t.Fatal(err)
			}
			steps := *n
			beforeChange = func(string) error { return nil }
			if steps < 2 {
				t.Fatalf("%s made %d changes: the seam is not reached", o.name, steps)
			}
			for step := range steps {
				dir := filepath.Join(t.TempDir(), "bin")
				goods := o.setup(t, dir)
				crashAt(t, step)
				if err := o.op(dir); err == nil {
					t.Fatalf("cut at step %d: no error", step)
				}
				beforeChange = func(string) error { return nil }
				st := startOver(t, dir, goods, step)
				switch {
				case o.failure == "yes" && (st.Failure == nil || st.Failure.Digest != digestOf("v2")):
					t.Fatalf("cut at step %d: the failure of v2 was not recorded: %+v", step, st.Failure)
				case o.failure == "no" && st.Failure != nil:
					t.Fatalf("cut at step %d: a failure was recorded: %+v", step, st.Failure)
				}
			}
		})
	}
}

func installV1(t *testing.T, dir string) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "outpost")
	if err := os.WriteFile(exe, []byte("v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := Install(dir, exe)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// beginV2 begins a trial of "v2" and counts starts of it.
func beginV2(t *testing.T, dir string, starts int) {
	t.Helper()
	v2 := staged(t, dir, "v2")
	if err := Begin(dir, Trial{Version: "v2", Digest: v2, MaxStarts: 3, Deadline: t0.Add(30 * time.Minute)}, t0); err != nil {
		t.Fatal(err)
	}
	for range starts {
		mustCheck(t, dir, t0)
		if err := Stopped(dir, "exit-code", "exited", "1"); err != nil {
			t.Fatal(err)
		}
	}
}

// startOver starts the service of dir several times after a cut at step,
// the binary never becoming healthy, and returns where it settled.
func startOver(t *testing.T, dir string, goods []string, step int) Status {
	t.Helper()
	for start := range DefaultMaxStarts + 2 {
		if _, err := Check(dir, t0.Add(time.Hour)); err != nil {
			t.Fatalf("cut at step %d, start %d: Check: %v", step, start, err)
		}
		st := status(t, dir)
		if st.Good == "" && st.Current == "" && st.Trial == nil && contains(goods, "") {
			continue
		}
		startable(t, dir)
		if !contains(goods, st.Good) {
			t.Fatalf("cut at step %d, start %d: good is %s, not one of %v", step, start, st.Good, goods)
		}
		if st.Current != st.Good && (st.Trial == nil || st.Trial.Digest != st.Current) {
			t.Fatalf("cut at step %d, start %d: current %s is neither good nor on trial: %+v", step, start, st.Current, st)
		}
		if err := Stopped(dir, "exit-code", "exited", "1"); err != nil {
			t.Fatalf("cut at step %d: Stopped: %v", step, err)
		}
	}
	st := status(t, dir)
	if st.Current != st.Good || st.Trial != nil {
		t.Fatalf("cut at step %d: the host did not settle on a good binary: %+v", step, st)
	}
	if st.Failure != nil && st.Failure.Digest == st.Good {
		t.Fatalf("cut at step %d: the good binary is recorded as failed: %+v", step, st.Failure)
	}
	return st
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
