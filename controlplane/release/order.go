package release

import (
	"archive/tar"
	"cmp"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Runlevel is one step of applying a release (UPD-5): its components
// apply in parallel, and the next runlevel waits until every one of them
// is done.
type Runlevel struct {
	Level      int         `json:"level"`
	Components []Component `json:"components"`
}

// Component is one component's manifests in a runlevel, in lexical
// order: the order they apply in.
type Component struct {
	Name      string `json:"name"`
	Manifests []File `json:"manifests"`
}

// Order groups manifests into runlevels, lowest first; components by
// name within one, manifests by name within a component.
func Order(files []File) ([]Runlevel, error) {
	byLevel := map[int]map[string][]File{}
	for _, f := range files {
		rl, comp, ok := ParseManifestName(f.Name)
		if !ok {
			return nil, fmt.Errorf("%w: manifest %q is not named 0000_<runlevel>_<component>_<name>.yaml", ErrInvalid, f.Name)
		}
		if byLevel[rl] == nil {
			byLevel[rl] = map[string][]File{}
		}
		byLevel[rl][comp] = append(byLevel[rl][comp], f)
	}
	var out []Runlevel
	for rl, comps := range byLevel {
		r := Runlevel{Level: rl}
		for name, fs := range comps {
			slices.SortFunc(fs, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
			r.Components = append(r.Components, Component{Name: name, Manifests: fs})
		}
		slices.SortFunc(r.Components, func(a, b Component) int { return strings.Compare(a.Name, b.Name) })
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Runlevel) int { return cmp.Compare(a.Level, b.Level) })
	return out, nil
}

// WriteTar writes the layout directory dir as a tar archive to w: the
// form a payload travels in as one file (Open reads it back).
func WriteTar(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil // a partial or temporary file
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		h.ModTime = h.ModTime.UTC()
		if d.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.IsDir() {
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
		return fmt.Errorf("archive %s: %w", dir, err)
	}
	return tw.Close()
}
