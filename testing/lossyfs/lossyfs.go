package lossyfs

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// pageSize is the unit in which unsynced data is tracked and lost.
const pageSize = 4096

// FS is a mounted lossy filesystem.
type FS struct {
	dir    string
	server *fuse.Server

	mu    sync.Mutex
	files map[*file]struct{} // every file ever created, for Cut
	// Syncs counts fsync calls on files, for a test to see that the
	// system under test syncs at all.
	syncs int
}

// Mount mounts an empty lossy filesystem on dir, which must exist.
// It needs root and /dev/fuse. Unmount it when done.
func Mount(dir string) (*FS, error) {
	f := &FS{dir: dir, files: map[*file]struct{}{}}
	root := &directory{fs: f}
	zero := time.Duration(0)
	srv, err := fs.Mount(dir, root, &fs.Options{
		// Nothing cached in the kernel for long: after Cut, what a process
		// reads must be what the filesystem kept.
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			FsName:            "lossyfs",
			Name:              "lossyfs",
			DirectMountStrict: true, // root calls mount(2): no fusermount needed
			DisableXAttrs:     true,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("mount lossyfs on %s: %w", dir, err)
	}
	f.server = srv
	return f, nil
}

// Dir is where the filesystem is mounted.
func (f *FS) Dir() string { return f.dir }

// Unmount unmounts the filesystem.
func (f *FS) Unmount() error {
	var err error
	// A process that just died may still hold the mount busy for a moment.
	for range 50 {
		if err = f.server.Unmount(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// Syncs is how many times a file was fsynced.
func (f *FS) Syncs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncs
}

// Cut is the power cut: every file's data goes back to what was last
// synced, and what was written since is lost. Call it when no process
// uses the filesystem (kill them first, as the power cut does). The
// kernel's cached pages are dropped when a file is next opened, since
// files are opened without FOPEN_KEEP_CACHE.
func (f *FS) Cut() (lostBytes int) {
	f.mu.Lock()
	files := make([]*file, 0, len(f.files))
	for fl := range f.files {
		files = append(files, fl)
	}
	f.mu.Unlock()
	for _, fl := range files {
		lostBytes += fl.cut()
		_ = fl.NotifyContent(0, 0) // drop the kernel's cached pages now
	}
	return lostBytes
}

func now() (sec uint64, nsec uint32) {
	t := time.Now()
	return uint64(t.Unix()), uint32(t.Nanosecond())
}

// directory is a directory node; the children live in the Inode tree.
type directory struct {
	fs.Inode
	fs   *FS
	mu   sync.Mutex
	mode uint32
}

var (
	_ fs.NodeGetattrer = (*directory)(nil)
	_ fs.NodeSetattrer = (*directory)(nil)
	_ fs.NodeMkdirer   = (*directory)(nil)
	_ fs.NodeCreater   = (*directory)(nil)
	_ fs.NodeUnlinker  = (*directory)(nil)
	_ fs.NodeRmdirer   = (*directory)(nil)
	_ fs.NodeRenamer   = (*directory)(nil)
	_ fs.NodeFsyncer   = (*directory)(nil)
)

func (d *directory) Getattr(_ context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.mu.Lock()
	defer d.mu.Unlock()
	mode := d.mode
	if mode == 0 {
		mode = 0o755
	}
	out.Mode = syscall.S_IFDIR | mode
	out.Nlink = 2
	return 0
}

func (d *directory) Setattr(_ context.Context, _ fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if m, ok := in.GetMode(); ok {
		d.mu.Lock()
		d.mode = m & 0o7777
		d.mu.Unlock()
	}
	return d.Getattr(context.Background(), nil, out)
}

func (d *directory) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if d.GetChild(name) != nil {
		return nil, syscall.EEXIST
	}
	child := &directory{fs: d.fs, mode: mode & 0o7777}
	ino := d.NewInode(ctx, child, fs.StableAttr{Mode: syscall.S_IFDIR})
	out.Mode = syscall.S_IFDIR | child.mode
	return ino, 0
}

func (d *directory) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if d.GetChild(name) != nil {
		// The kernel sends Create only when its lookup found nothing.
		return nil, nil, 0, syscall.EEXIST
	}
	fl := &file{fs: d.fs, mode: mode & 0o7777}
	fl.mtime, fl.mtimeNsec = now()
	d.fs.mu.Lock()
	d.fs.files[fl] = struct{}{}
	d.fs.mu.Unlock()
	ino := d.NewInode(ctx, fl, fs.StableAttr{Mode: syscall.S_IFREG})
	out.Mode = syscall.S_IFREG | fl.mode
	return ino, nil, 0, 0
}

func (d *directory) Unlink(_ context.Context, name string) syscall.Errno {
	c := d.GetChild(name)
	if c == nil {
		return syscall.ENOENT
	}
	if c.IsDir() {
		return syscall.EISDIR
	}
	return 0 // the bridge removes the child
}

func (d *directory) Rmdir(_ context.Context, name string) syscall.Errno {
	c := d.GetChild(name)
	if c == nil {
		return syscall.ENOENT
	}
	if !c.IsDir() {
		return syscall.ENOTDIR
	}
	if len(c.Children()) > 0 {
		return syscall.ENOTEMPTY
	}
	return 0
}

func (d *directory) Rename(_ context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	c := d.GetChild(name)
	if c == nil {
		return syscall.ENOENT
	}
	if t := newParent.EmbeddedInode().GetChild(newName); t != nil && t.IsDir() && len(t.Children()) > 0 {
		return syscall.ENOTEMPTY
	}
	return 0 // the bridge moves the child, replacing any target
}

// Fsync of a directory: metadata is durable at once.
func (d *directory) Fsync(context.Context, fs.FileHandle, uint32) syscall.Errno { return 0 }

// file is a regular file: what processes see (data) and what would
// survive a power cut (durable).
type file struct {
	fs.Inode
	fs *FS

	mu        sync.Mutex
	mode      uint32
	data      []byte
	durable   []byte
	dirty     map[int64]struct{} // pages written since the last sync
	sizeDirty bool
	mtime     uint64
	mtimeNsec uint32
}

var (
	_ fs.NodeOpener    = (*file)(nil)
	_ fs.NodeReader    = (*file)(nil)
	_ fs.NodeWriter    = (*file)(nil)
	_ fs.NodeGetattrer = (*file)(nil)
	_ fs.NodeSetattrer = (*file)(nil)
	_ fs.NodeFsyncer   = (*file)(nil)
	_ fs.NodeFlusher   = (*file)(nil)
	_ fs.NodeAllocater = (*file)(nil)
)

// Open keeps no page cache across opens (no FOPEN_KEEP_CACHE), so that a
// process started after a Cut reads what survived.
func (f *file) Open(context.Context, uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, 0, 0
}

func (f *file) Read(_ context.Context, _ fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if off >= int64(len(f.data)) {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), int64(len(f.data)))
	return fuse.ReadResultData(slices.Clone(f.data[off:end])), 0
}

// markDirty records the pages of [off, end) as unsynced; the caller holds mu.
func (f *file) markDirty(off, end int64) {
	if f.dirty == nil {
		f.dirty = map[int64]struct{}{}
	}
	for p := off / pageSize; p*pageSize < end; p++ {
		f.dirty[p] = struct{}{}
	}
}

// resize sets the visible size; the caller holds mu.
func (f *file) resize(size int64) {
	if size <= int64(len(f.data)) {
		f.data = f.data[:size]
	} else {
		f.data = append(f.data, make([]byte, size-int64(len(f.data)))...)
	}
	f.sizeDirty = true
}

func (f *file) Write(_ context.Context, _ fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	f.mu.Lock()
	defer f.mu.Unlock()
	end := off + int64(len(data))
	if end > int64(len(f.data)) {
		f.resize(end)
	}
	copy(f.data[off:end], data)
	f.markDirty(off, end)
	f.mtime, f.mtimeNsec = now()
	return uint32(len(data)), 0
}

func (f *file) Allocate(_ context.Context, _ fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	f.mu.Lock()
	defer f.mu.Unlock()
	const keepSize = 0x1 // FALLOC_FL_KEEP_SIZE
	if mode&keepSize == 0 && int64(off+size) > int64(len(f.data)) {
		f.resize(int64(off + size))
	}
	return 0
}

func (f *file) Getattr(_ context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f.mu.Lock()
	defer f.mu.Unlock()
	out.Mode = syscall.S_IFREG | f.mode
	out.Size = uint64(len(f.data))
	out.Blocks = (out.Size + 511) / 512
	out.Nlink = 1
	out.Mtime, out.Mtimensec = f.mtime, f.mtimeNsec
	out.Ctime, out.Ctimensec = f.mtime, f.mtimeNsec
	return 0
}

func (f *file) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	f.mu.Lock()
	if sz, ok := in.GetSize(); ok {
		f.resize(int64(sz))
	}
	if m, ok := in.GetMode(); ok {
		f.mode = m & 0o7777
	}
	f.mu.Unlock()
	return f.Getattr(ctx, fh, out)
}

func (f *file) Flush(context.Context, fs.FileHandle) syscall.Errno { return 0 }

// Fsync makes what was written so far survive a Cut.
func (f *file) Fsync(context.Context, fs.FileHandle, uint32) syscall.Errno {
	f.mu.Lock()
	if f.sizeDirty || len(f.durable) != len(f.data) {
		nd := make([]byte, len(f.data))
		copy(nd, f.durable[:min(len(f.durable), len(f.data))])
		f.durable = nd
	}
	for p := range f.dirty {
		lo := p * pageSize
		if lo >= int64(len(f.data)) {
			continue
		}
		hi := min(lo+pageSize, int64(len(f.data)))
		copy(f.durable[lo:hi], f.data[lo:hi])
	}
	clear(f.dirty)
	f.sizeDirty = false
	f.mu.Unlock()
	f.fs.mu.Lock()
	f.fs.syncs++
	f.fs.mu.Unlock()
	return 0
}

// cut drops what was not synced and says how many bytes that was.
func (f *file) cut() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	lost := 0
	for p := range f.dirty {
		lo := p * pageSize
		if lo < int64(len(f.data)) {
			lost += int(min(lo+pageSize, int64(len(f.data))) - lo)
		}
	}
	f.data = slices.Clone(f.durable)
	clear(f.dirty)
	f.sizeDirty = false
	return lost
}

// Available reports whether this machine can mount lossyfs: root and
// /dev/fuse.
func Available() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("lossyfs needs root to mount")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("lossyfs needs /dev/fuse: %w", err)
	}
	return nil
}
