package osupdate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The A/B directory backend switches at the next boot, not before; a
// stage of what runs cancels a pending switch.
func TestDirBackend(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	d := &DirBackend{Dir: filepath.Join(dir, "os"), Initial: "v1", BootID: func() (string, error) { return BootID(run) }}
	if s, err := d.Booted(ctx); err != nil || s.Version != "v1" {
		t.Fatalf("first boot: %+v %v", s, err)
	}
	if err := d.Stage(ctx, OSState{Version: "v2", KernelArgs: []string{"nosmt"}}); err != nil {
		t.Fatal(err)
	}
	if s, _ := d.Booted(ctx); s.Version != "v1" {
		t.Errorf("switched to %s before a reboot", s.Version)
	}
	if b, err := os.ReadFile(filepath.Join(d.Dir, "b", "tree", "etc", "os-version")); err != nil || string(b) != "v2\n" {
		t.Errorf("staged tree: %q %v", b, err)
	}
	_ = os.RemoveAll(run)
	if s, _ := d.Booted(ctx); s.Version != "v2" || strings.Join(s.KernelArgs, " ") != "nosmt" {
		t.Errorf("after the reboot: %+v, want v2 nosmt", s)
	}
	// Stage v1 again (a rollback), then cancel it by staging what runs.
	if err := d.Stage(ctx, OSState{Version: "v1"}); err != nil {
		t.Fatal(err)
	}
	if err := d.Stage(ctx, OSState{Version: "v2", KernelArgs: []string{"nosmt"}}); err != nil {
		t.Fatal(err)
	}
	_ = os.RemoveAll(run)
	if s, _ := d.Booted(ctx); s.Version != "v2" {
		t.Errorf("a cancelled stage switched to %s", s.Version)
	}
}

// The image backends call their tool as its users would.
func TestImageBackends(t *testing.T) {
	ctx := context.Background()
	cmdline := filepath.Join(t.TempDir(), "cmdline")
	if err := os.WriteFile(cmdline, []byte("BOOT_IMAGE=/vmlinuz root=/dev/sda1 nosmt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		tool, status string
		want         OSState
		wantCalls    []string
		wantErr      error
	}{
		{"bootc", `{"status":{"booted":{"image":{"image":{"image":"quay.io/site/os:41"}}}}}`, OSState{Version: "quay.io/site/os:42"},
			[]string{"bootc status --json", "bootc switch quay.io/site/os:42"}, nil},
		{"bootc", `{"status":{"booted":{"image":{"image":{"image":"quay.io/site/os:41"}}}}}`, OSState{Version: "quay.io/site/os:41", KernelArgs: []string{"audit=1"}},
			nil, ErrNotSupported},
		{"rpm-ostree", `{"deployments":[{"booted":false,"container-image-reference":"ostree-unverified-registry:quay.io/x:1"},{"booted":true,"container-image-reference":"ostree-unverified-registry:quay.io/x:2"}]}`,
			OSState{Version: "quay.io/x:3", KernelArgs: []string{"audit=1"}},
			[]string{"rpm-ostree status --json", "rpm-ostree rebase ostree-unverified-registry:quay.io/x:3", "rpm-ostree kargs --delete=nosmt --append=audit=1"}, nil},
	} {
		var calls []string
		var managed []string
		b := &ImageBackend{Tool: tt.tool, Cmdline: cmdline,
			Managed: func() []string {
				if tt.tool == "bootc" {
					return nil // bootc's arguments come with its image
				}
				return []string{"nosmt"}
			},
			SetManaged: func(a []string) error { managed = a; return nil },
			Run: func(_ context.Context, name string, args ...string) ([]byte, error) {
				calls = append(calls, name+" "+strings.Join(args, " "))
				return []byte(tt.status), nil
			}}
		err := b.Stage(ctx, tt.want)
		if tt.wantErr != nil {
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("%s stage %+v: %v, want %v", tt.tool, tt.want, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.tool, err)
		}
		if strings.Join(calls, "; ") != strings.Join(tt.wantCalls, "; ") {
			t.Errorf("%s calls:\n %v\nwant\n %v", tt.tool, calls, tt.wantCalls)
		}
		if strings.Join(managed, " ") != strings.Join(tt.want.KernelArgs, " ") {
			t.Errorf("%s managed arguments %v, want %v", tt.tool, managed, tt.want.KernelArgs)
		}
	}
	if err := (NoneBackend{}).Stage(ctx, OSState{Version: "v2"}); !errors.Is(err, ErrNotSupported) {
		t.Errorf("none backend staging an image: %v", err)
	}
	if err := (NoneBackend{}).Stage(ctx, OSState{}); err != nil {
		t.Errorf("none backend with nothing to stage: %v", err)
	}
}
