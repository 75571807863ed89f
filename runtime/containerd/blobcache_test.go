package containerd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/containerd/containerd/content"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// storeOfBlobs serves blobs by digest and counts the reads.
type storeOfBlobs struct {
	content.Store // only ReaderAt is used
	blobs         map[digest.Digest][]byte
	reads         map[digest.Digest]int
}

func (s *storeOfBlobs) ReaderAt(_ context.Context, desc ocispec.Descriptor) (content.ReaderAt, error) {
	s.reads[desc.Digest]++
	return blobReader{bytes.NewReader(s.blobs[desc.Digest])}, nil
}

func (s *storeOfBlobs) add(data []byte) ocispec.Descriptor {
	d := digest.FromBytes(data)
	s.blobs[d] = data
	return ocispec.Descriptor{Digest: d, Size: int64(len(data))}
}

func readAll(t *testing.T, b *blobCache, desc ocispec.Descriptor) []byte {
	t.Helper()
	ra, err := b.ReaderAt(context.Background(), desc)
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	data, err := io.ReadAll(io.NewSectionReader(ra, 0, ra.Size()))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Small blobs are read once and served from memory; a blob that does not
// match its digest, a large one, and one evicted by newer ones are read
// from the store each time.
func TestBlobCache(t *testing.T) {
	store := &storeOfBlobs{blobs: map[digest.Digest][]byte{}, reads: map[digest.Digest]int{}}
	b := &blobCache{Store: store}

	config := store.add([]byte(`{"config":{}}`))
	for range 3 {
		if got := readAll(t, b, config); string(got) != `{"config":{}}` {
			t.Fatalf("config read as %q", got)
		}
	}
	if n := store.reads[config.Digest]; n != 1 {
		t.Errorf("a small blob read 3 times: %d reads from the store, want 1", n)
	}

	bad := ocispec.Descriptor{Digest: digest.FromString("something else"), Size: 4}
	store.blobs[bad.Digest] = []byte("evil")
	readAll(t, b, bad)
	readAll(t, b, bad)
	if n := store.reads[bad.Digest]; n != 2 {
		t.Errorf("a blob that does not match its digest: %d reads, want 2 (never cached)", n)
	}

	layer := store.add(bytes.Repeat([]byte("x"), cachedBlobMax+1))
	readAll(t, b, layer)
	readAll(t, b, layer)
	if n := store.reads[layer.Digest]; n != 2 {
		t.Errorf("a layer: %d reads, want 2 (not cached)", n)
	}

	for i := range cachedBlobs {
		readAll(t, b, store.add([]byte(fmt.Sprintf("blob %d", i))))
	}
	readAll(t, b, config)
	if n := store.reads[config.Digest]; n != 2 {
		t.Errorf("after %d newer blobs, the config: %d reads, want 2 (evicted, read again)", cachedBlobs, n)
	}
	if len(b.blobs) != cachedBlobs || len(b.order) != cachedBlobs {
		t.Errorf("cache holds %d blobs (%d in order), want at most %d", len(b.blobs), len(b.order), cachedBlobs)
	}
}
