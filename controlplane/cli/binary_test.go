package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/selfupdate"
)

// adm binary on a host's directory: install makes the binary current and
// good once, status shows it as JSON and for people, and the systemd
// hooks say nothing and exit 0 when there is no trial; rollback and
// mark-good report that there is none.
func TestAdmBinary(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "bin")
	exe := writeFile(t, t.TempDir(), "outpost", "#!/bin/sh\necho 1.3.0\n")

	res := runCLI(t, ctx, "", "adm", "binary", "install", "--dir", dir, "--exe", exe)
	if res.code != 0 || !strings.HasPrefix(res.stdout, "installed sha256:") || !strings.HasSuffix(res.stdout, " as current and good in "+dir+"\n") {
		t.Fatalf("install: %+v", res)
	}
	digest := strings.Fields(res.stdout)[1]
	res = runCLI(t, ctx, "", "adm", "binary", "install", "--dir", dir, "--exe", exe)
	expect(t, "install again", res, 0, digest+" already installed\n", "")

	res = runCLI(t, ctx, "", "adm", "binary", "status", "--dir", dir, "-o", "json")
	if res.code != 0 {
		t.Fatalf("status -o json: %+v", res)
	}
	var st selfupdate.Status
	if err := json.Unmarshal([]byte(res.stdout), &st); err != nil {
		t.Fatalf("status -o json: %v\n%s", err, res.stdout)
	}
	if st.Current != digest || st.Good != digest || st.Trial != nil || st.Failure != nil {
		t.Fatalf("status: %+v", st)
	}
	res = runCLI(t, ctx, "", "adm", "binary", "status", "--dir", dir)
	if res.code != 0 || !strings.Contains(res.stdout, "Current:") || !strings.Contains(res.stdout, "Trial:         <none>") {
		t.Fatalf("status: %+v", res)
	}
	res = runCLI(t, ctx, "", "adm", "binary", "status", "--dir", dir, "-o", "yaml")
	if res.code != 1 || !strings.Contains(res.stderr, "json") {
		t.Fatalf("status -o yaml: %+v", res)
	}

	for _, hook := range []string{"check", "stopped"} {
		res = runCLI(t, ctx, "", "adm", "binary", hook, "--dir", dir)
		expect(t, hook, res, 0, "", "")
	}
	res = runCLI(t, ctx, "", "adm", "binary", "rollback", "--dir", dir)
	expect(t, "rollback", res, 0, "no trial in progress: nothing to roll back\n", "")
	res = runCLI(t, ctx, "", "adm", "binary", "mark-good", "--dir", dir)
	expect(t, "mark-good", res, 0, "no trial in progress: nothing to mark good\n", "")
}

// check rolls a trial back after its starts and prints the reason on
// stderr, exiting 0; rollback records the reason given.
func TestAdmBinaryTrial(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "bin")
	exe := writeFile(t, t.TempDir(), "outpost", "1.2.0")
	good, err := selfupdate.Install(dir, exe)
	if err != nil {
		t.Fatal(err)
	}
	next := writeFile(t, t.TempDir(), "outpost", "1.3.0")
	d, err := selfupdate.Install(dir, next)
	if err != nil {
		t.Fatal(err)
	}
	if err := selfupdate.Begin(dir, selfupdate.Trial{Version: "1.3.0", Digest: d, MaxStarts: 1}, time.Now()); err != nil {
		t.Fatal(err)
	}
	res := runCLI(t, ctx, "", "adm", "binary", "check", "--dir", dir)
	expect(t, "first check", res, 0, "", "")
	t.Setenv("SERVICE_RESULT", "exit-code")
	t.Setenv("EXIT_CODE", "exited")
	t.Setenv("EXIT_STATUS", "2")
	res = runCLI(t, ctx, "", "adm", "binary", "stopped", "--dir", dir)
	expect(t, "stopped", res, 0, "", "")
	res = runCLI(t, ctx, "", "adm", "binary", "status", "--dir", dir)
	for _, want := range []string{"Trial:         1.3.0 " + d, "Starts:      1/1", "Last exit:   exit-code status=2"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, res.stdout)
		}
	}
	res = runCLI(t, ctx, "", "adm", "binary", "check", "--dir", dir)
	if res.code != 0 || res.stdout != "" || !strings.Contains(res.stderr, "did not become healthy in 1 start, last exit: exit-code status=2") {
		t.Fatalf("second check: %+v", res)
	}
	if st, err := selfupdate.Read(dir); err != nil || st.Current != good || st.Trial != nil {
		t.Fatalf("after the rollback: %+v, %v", st, err)
	}

	if err := selfupdate.Begin(dir, selfupdate.Trial{Version: "1.3.0", Digest: d}, time.Now()); err != nil {
		t.Fatal(err)
	}
	res = runCLI(t, ctx, "", "adm", "binary", "rollback", "--dir", dir, "--reason", "raft never caught up")
	expect(t, "rollback", res, 0, d+" rolled back to "+good+"; restart the service to run it\n", "")
	st, err := selfupdate.Read(dir)
	if err != nil || st.Current != good || st.Failure == nil || st.Failure.Reason != "outpost 1.3.0 "+d+" rolled back by hand: raft never caught up" {
		t.Fatalf("after rollback: %+v %+v, %v", st, st.Failure, err)
	}
}
