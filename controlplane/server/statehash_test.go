package server

import (
	"slices"
	"testing"

	"github.com/outpost-edge/outpost/raftstore"
)

// The servers named as diverged are those whose hash is not the most
// common one; with no most common hash, every one that answered. A server
// that gave no hash is named by none (issue 9 item 4b).
func TestCompareHashes(t *testing.T) {
	known := func(id string, h uint64) raftstore.ServerHash {
		return raftstore.ServerHash{ID: id, Hash: h, Known: true}
	}
	unknown := raftstore.ServerHash{ID: "s9", Error: "unreachable"}
	for _, tt := range []struct {
		name   string
		hashes []raftstore.ServerHash
		want   []string
	}{
		{"all equal", []raftstore.ServerHash{known("s1", 1), known("s2", 1), known("s3", 1)}, nil},
		{"one of three differs", []raftstore.ServerHash{known("s1", 1), known("s2", 2), known("s3", 1)}, []string{"s2"}},
		{"two of five differ alike", []raftstore.ServerHash{known("s1", 1), known("s2", 2), known("s3", 1), known("s4", 2), known("s5", 1)}, []string{"s2", "s4"}},
		{"a tie names both", []raftstore.ServerHash{known("s1", 1), known("s2", 2), unknown}, []string{"s1", "s2"}},
		{"one that gave no hash is not named", []raftstore.ServerHash{known("s1", 1), known("s2", 1), unknown}, nil},
		{"all differ", []raftstore.ServerHash{known("s1", 1), known("s2", 2), known("s3", 3)}, []string{"s1", "s2", "s3"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rep := compareHashes(7, tt.hashes)
			if !slices.Equal(rep.Diverged, tt.want) {
				t.Errorf("diverged %v, want %v", rep.Diverged, tt.want)
			}
			if len(rep.Servers) != len(tt.hashes) || rep.Index != 7 {
				t.Errorf("report %+v does not list every server at index 7", rep)
			}
		})
	}
}
