package osupdate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// NoneBackend is a host whose OS outpost does not manage: a config may
// not change its OS image or kernel arguments.
type NoneBackend struct{}

func (NoneBackend) Name() string { return "none" }

func (NoneBackend) Booted(context.Context) (OSState, error) { return OSState{}, nil }

func (b NoneBackend) Stage(_ context.Context, want OSState) error { return b.CanStage(want) }

// CanStage refuses any OS image or kernel argument.
func (NoneBackend) CanStage(want OSState) error {
	if want.Version != "" || len(want.KernelArgs) > 0 {
		return fmt.Errorf("%w: OS image %q, kernel arguments %v (start the agent with --os-backend bootc, rpm-ostree or directory)", ErrNotSupported, want.Version, want.KernelArgs)
	}
	return nil
}

// DirBackend is an A/B OS on a directory: Stage writes the wanted OS into
// the slot that does not run, as a versioned tree, and marks it for the
// next boot; the first Booted of a later boot switches to it. It stands
// for an image-based OS in the tests, where the reboot is real (systemd
// under nspawn) but the kernel is the machine's.
type DirBackend struct {
	// Dir holds the slots and the state.
	Dir string
	// BootID names the current boot (BootID(runDir) on a host).
	BootID func() (string, error)
	// Initial is the version a host runs before anything was staged.
	Initial string
}

type dirState struct {
	Booted string `json:"booted"`
	Next   string `json:"next"`
	// StagedIn is the boot Next was staged in: a later boot switches.
	StagedIn string `json:"stagedIn,omitempty"`
}

func (d *DirBackend) Name() string { return "directory" }

func (d *DirBackend) load() (dirState, error) {
	st := dirState{Booted: "a", Next: "a"}
	b, err := os.ReadFile(filepath.Join(d.Dir, "state.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: %w", filepath.Join(d.Dir, "state.json"), err)
	}
	return st, nil
}

func (d *DirBackend) save(st dirState) error {
	b, _ := json.Marshal(st)
	return writeAtomic(filepath.Join(d.Dir, "state.json"), b, 0o644, -1, -1)
}

func (d *DirBackend) slot(name string) (OSState, error) {
	b, err := os.ReadFile(filepath.Join(d.Dir, name, "os.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return OSState{Version: d.Initial}, nil
	}
	if err != nil {
		return OSState{}, err
	}
	var s OSState
	if err := json.Unmarshal(b, &s); err != nil {
		return OSState{}, fmt.Errorf("slot %s: %w", name, err)
	}
	return s, nil
}

// Booted switches to the staged slot on the first look of a new boot.
func (d *DirBackend) Booted(context.Context) (OSState, error) {
	st, err := d.load()
	if err != nil {
		return OSState{}, err
	}
	if st.Next != st.Booted {
		boot, err := d.BootID()
		if err != nil {
			return OSState{}, err
		}
		if boot != st.StagedIn {
			st.Booted = st.Next
			if err := d.save(st); err != nil {
				return OSState{}, err
			}
		}
	}
	return d.slot(st.Booted)
}

// Stage writes want into the other slot (a tree with its version and
// kernel arguments) for the next boot; want equal to what runs cancels a
// pending switch.
func (d *DirBackend) Stage(ctx context.Context, want OSState) error {
	booted, err := d.Booted(ctx)
	if err != nil {
		return err
	}
	st, err := d.load()
	if err != nil {
		return err
	}
	if sameOS(booted, want) {
		st.Next = st.Booted
		return d.save(st)
	}
	other := "b"
	if st.Booted == "b" {
		other = "a"
	}
	b, _ := json.Marshal(want)
	if err := writeAtomic(filepath.Join(d.Dir, other, "tree", "etc", "os-version"), []byte(want.Version+"\n"), 0o644, -1, -1); err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(d.Dir, other, "os.json"), b, 0o644, -1, -1); err != nil {
		return err
	}
	boot, err := d.BootID()
	if err != nil {
		return err
	}
	st.Next, st.StagedIn = other, boot
	return d.save(st)
}

// Runner runs a command and returns its standard output.
type Runner func(ctx context.Context, name string, args ...string) ([]byte, error)

func execRunner(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// ImageBackend drives bootc or rpm-ostree, the image-based OS tools of
// Fedora CoreOS, RHEL for Edge and bootc hosts: the OS image is a
// container image reference; kernel arguments are rpm-ostree's kargs
// (bootc takes them from the image, so it refuses others).
type ImageBackend struct {
	// Tool is "bootc" or "rpm-ostree".
	Tool string
	// Run runs the tool (default: exec).
	Run Runner
	// Cmdline is the kernel command line (default /proc/cmdline).
	Cmdline string
	// Managed lists the kernel arguments outpost added: those Booted
	// reports when they are on the command line (default: a file beside
	// the agent's state, set by the agent).
	Managed func() []string
	// SetManaged records the arguments outpost manages after a Stage.
	SetManaged func([]string) error
}

func (b *ImageBackend) Name() string { return b.Tool }

func (b *ImageBackend) run(ctx context.Context, args ...string) ([]byte, error) {
	r := b.Run
	if r == nil {
		r = execRunner
	}
	return r(ctx, b.Tool, args...)
}

// bootcStatus is the part of `bootc status --json` read here (and of
// `rpm-ostree status --json`, whose deployments carry container-image-
// reference instead).
type bootcStatus struct {
	Status struct {
		Booted *struct {
			Image *struct {
				Image struct {
					Image string `json:"image"`
				} `json:"image"`
			} `json:"image"`
		} `json:"booted"`
	} `json:"status"`
	Deployments []struct {
		Booted                  bool   `json:"booted"`
		ContainerImageReference string `json:"container-image-reference"`
	} `json:"deployments"`
}

func (b *ImageBackend) Booted(ctx context.Context) (OSState, error) {
	out, err := b.run(ctx, "status", "--json")
	if err != nil {
		return OSState{}, err
	}
	var st bootcStatus
	if err := json.Unmarshal(out, &st); err != nil {
		return OSState{}, fmt.Errorf("%s status --json: %w", b.Tool, err)
	}
	var s OSState
	switch {
	case st.Status.Booted != nil && st.Status.Booted.Image != nil:
		s.Version = st.Status.Booted.Image.Image.Image
	default:
		for _, d := range st.Deployments {
			if d.Booted {
				// "ostree-unverified-registry:quay.io/x:tag" → the image.
				ref := d.ContainerImageReference
				if strings.HasPrefix(ref, "ostree-") {
					_, ref, _ = strings.Cut(ref, ":")
				}
				s.Version = ref
			}
		}
	}
	cmdline := b.Cmdline
	if cmdline == "" {
		cmdline = "/proc/cmdline"
	}
	raw, err := os.ReadFile(cmdline)
	if err != nil {
		return s, fmt.Errorf("kernel command line: %w", err)
	}
	on := strings.Fields(string(raw))
	if b.Managed != nil {
		for _, a := range b.Managed() {
			if slices.Contains(on, a) {
				s.KernelArgs = append(s.KernelArgs, a)
			}
		}
	}
	return s, nil
}

// CanStage refuses kernel arguments on bootc, which takes them from the
// image.
func (b *ImageBackend) CanStage(want OSState) error {
	if b.Tool != "rpm-ostree" && len(want.KernelArgs) > 0 {
		return fmt.Errorf("%w: bootc takes kernel arguments from the image (/usr/lib/bootc/kargs.d), not from a MachineConfig", ErrNotSupported)
	}
	return nil
}

// Rollback boots the previous deployment again (it is on disk: nothing
// is fetched) and restores the kernel arguments outpost managed.
func (b *ImageBackend) Rollback(ctx context.Context, prev OSState) error {
	if _, err := b.run(ctx, "rollback"); err != nil {
		return err
	}
	if b.SetManaged != nil {
		return b.SetManaged(prev.KernelArgs)
	}
	return nil
}

func (b *ImageBackend) Stage(ctx context.Context, want OSState) error {
	cur, err := b.Booted(ctx)
	if err != nil {
		return err
	}
	if want.Version != "" && want.Version != cur.Version {
		args := []string{"switch", want.Version}
		if b.Tool == "rpm-ostree" {
			args = []string{"rebase", "ostree-unverified-registry:" + want.Version}
		}
		if _, err := b.run(ctx, args...); err != nil {
			return err
		}
	}
	if !slices.Equal(cur.KernelArgs, want.KernelArgs) {
		if b.Tool != "rpm-ostree" {
			return fmt.Errorf("%w: bootc takes kernel arguments from the image (/usr/lib/bootc/kargs.d), not from a MachineConfig", ErrNotSupported)
		}
		args := []string{"kargs"}
		for _, a := range cur.KernelArgs {
			if !slices.Contains(want.KernelArgs, a) {
				args = append(args, "--delete="+a)
			}
		}
		for _, a := range want.KernelArgs {
			if !slices.Contains(cur.KernelArgs, a) {
				args = append(args, "--append="+a)
			}
		}
		if _, err := b.run(ctx, args...); err != nil {
			return err
		}
	}
	if b.SetManaged != nil {
		return b.SetManaged(want.KernelArgs)
	}
	return nil
}
