package cli

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/outpost-edge/outpost/controlplane/client"
)

// errUnsafeEntry is an archive entry from a container that would land
// outside the destination (an absolute name, "..", a link out).
var errUnsafeEntry = errors.New("refusing an archive entry that leaves the destination")

// podPath is one side of cp: a local path, or a path in a pod's container.
type podPath struct {
	namespace, pod string // pod "" for a local path
	path           string
}

// parsePodPath reads kubectl's [NAMESPACE/]POD:PATH; anything else is
// local. A local path with a colon is written with a directory before
// it (./a:b), as in kubectl.
func parsePodPath(s string) podPath {
	if strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".") {
		return podPath{path: s}
	}
	pod, p, ok := strings.Cut(s, ":")
	if !ok || pod == "" {
		return podPath{path: s}
	}
	ns, name, hasNS := strings.Cut(pod, "/")
	if !hasNS {
		return podPath{pod: pod, path: p}
	}
	return podPath{namespace: ns, pod: name, path: p}
}

func newCpCommand(o *options) *cobra.Command {
	var container string
	cmd := &cobra.Command{
		Use:   "cp [NAMESPACE/]POD:PATH LOCAL | LOCAL [NAMESPACE/]POD:PATH",
		Short: "Copy files and directories to and from containers",
		Long: "cp copies a file or a directory tree between this machine and a container, as kubectl\n" +
			"cp does: through `exec`, running tar in the container, so the container's image must\n" +
			"have tar. The source's last path element is copied as the destination path. Entries\n" +
			"that would land outside the destination (absolute names, .., links out) are refused.",
		Example: `  outpost cp web-6d4b9-x2x7q:/var/log/app.log ./app.log
  outpost cp ./config web-6d4b9-x2x7q:/etc/app -c app
  outpost cp shop/db-0:/data/dump.sql dump.sql`,
		Args: exactArgs(2, "a source and a destination, one of them POD:PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, dst := parsePodPath(args[0]), parsePodPath(args[1])
			switch {
			case src.pod != "" && dst.pod != "":
				return usagef("one of the source and the destination must be local; copying between pods is not supported")
			case src.pod == "" && dst.pod == "":
				return usagef("one of the source and the destination must be POD:PATH")
			}
			remote := src
			if dst.pod != "" {
				remote = dst
			}
			if remote.path == "" {
				return usagef("the path in the pod is empty: give POD:PATH")
			}
			cl, err := o.client(cmd)
			if err != nil {
				return err
			}
			ns := remote.namespace
			if ns == "" {
				ns = cl.Namespace()
			}
			c := &podCopy{ctx: cmd.Context(), cl: cl, ns: ns, pod: remote.pod, container: container}
			if src.pod != "" {
				return c.download(src.path, dst.path)
			}
			return c.upload(src.path, dst.path)
		},
	}
	cmd.Flags().StringVarP(&container, "container", "c", "", "the container (default: the pod's only container)")
	return cmd
}

// podCopy runs tar in one container.
type podCopy struct {
	ctx            context.Context
	cl             *client.Client
	ns, pod        string
	container      string
	stderrOfRemote bytes.Buffer
}

// run runs command in the container with stdin and stdout, and makes a
// failure an error that carries what the command said on stderr.
func (c *podCopy) run(command []string, stdin io.Reader, stdout io.Writer) error {
	code, err := c.cl.Exec(c.ctx, c.ns, c.pod, client.ExecOptions{
		Container: c.container, Command: command, Stdin: stdin, Stdout: stdout, Stderr: &c.stderrOfRemote,
	})
	if err != nil {
		return fmt.Errorf("cp needs tar in the container: %w", err)
	}
	if code != 0 {
		return fmt.Errorf("%s in pod %s exited with code %d: %s", command[0], c.pod, code, strings.TrimSpace(c.stderrOfRemote.String()))
	}
	return nil
}

// download copies remote (a file or directory) to local: the tree's
// root becomes local itself.
func (c *podCopy) download(remote, local string) error {
	remote = path.Clean(remote)
	dir, base := path.Dir(remote), path.Base(remote)
	if base == "/" || base == "." || base == ".." {
		return usagef("cannot copy %q: name a file or a directory below /", remote)
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := untarTo(pr, base, local)
		// Drain what is left so the exec stream is not stuck on a
		// failed extraction.
		_, _ = io.Copy(io.Discard, pr)
		done <- err
	}()
	runErr := c.run([]string{"tar", "cf", "-", "-C", dir, base}, nil, pw)
	pw.Close()
	if err := <-done; err != nil {
		return err
	}
	return runErr
}

// upload copies local (a file or directory) to remote, which it becomes.
func (c *podCopy) upload(local, remote string) error {
	if _, err := os.Lstat(local); err != nil {
		return fmt.Errorf("cannot copy %s: %w", local, err)
	}
	remote = path.Clean(remote)
	dir, base := path.Dir(remote), path.Base(remote)
	if base == "/" || base == "." || base == ".." {
		return usagef("cannot copy to %q: name a file or a directory below /", remote)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarTree(pw, local, base)) }()
	err := c.run([]string{"tar", "xmf", "-", "-C", dir}, pr, io.Discard)
	pr.Close()
	return err
}

// tarTree writes local (a file or a directory tree) to w, named as name.
// Symbolic links are archived as links; other special files are skipped.
func tarTree(w io.Writer, local, name string) error {
	tw := tar.NewWriter(w)
	root := filepath.Clean(local)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		link := ""
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		case !info.Mode().IsRegular() && !info.IsDir():
			return nil
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return fmt.Errorf("archive %s: %w", p, err)
		}
		hdr.Name = path.Join(name, filepath.ToSlash(rel))
		if info.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// untarTo extracts a tar stream whose entries are base and what is below
// it into local, which stands for base (a file base goes into local when
// local is a directory). Entries elsewhere, or that would land outside
// local, are refused.
func untarTo(r io.Reader, base, local string) error {
	tr := tar.NewReader(r)
	local = filepath.Clean(local)
	// A file copied to a directory that exists goes into it, as cp's.
	st, err := os.Stat(local)
	intoDir := err == nil && st.IsDir()
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the archive from the container: %w", err)
		}
		name := path.Clean(hdr.Name)
		rel, ok := strings.CutPrefix(name, base)
		if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) || path.IsAbs(name) {
			return fmt.Errorf("%w: %q", errUnsafeEntry, hdr.Name)
		}
		target := filepath.Join(local, filepath.FromSlash(rel))
		if rel == "" && intoDir && hdr.Typeflag == tar.TypeReg {
			target = filepath.Join(local, base)
		}
		mode := fs.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, mode|0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("write %s: %w", target, err)
			}
		case tar.TypeSymlink:
			// A link may point only within what is copied.
			dest := hdr.Linkname
			if !path.IsAbs(dest) {
				dest = path.Join(path.Dir(name), dest)
			}
			if path.IsAbs(hdr.Linkname) || (dest != base && !strings.HasPrefix(dest, base+"/")) {
				return fmt.Errorf("%w: %q links to %q", errUnsafeEntry, hdr.Name, hdr.Linkname)
			}
			if err := os.Symlink(hdr.Linkname, target); err != nil {
				return err
			}
		default:
			// Devices, fifos, hard links: not copied, as kubectl.
		}
	}
}
