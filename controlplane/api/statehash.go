package api

// StateHashReport is the reply of GET /debug/statehash: the last
// comparison of the servers' state hashes, taken by the server asked.
// Servers that applied the same raft log hold the same objects, so their
// hashes at one index are equal; one that differs has drifted.
type StateHashReport struct {
	TypeMeta `json:",inline"`
	// Index is the raft index the hashes were taken at; 0 before the
	// first check.
	Index     uint64 `json:"index"`
	CheckedAt *Time  `json:"checkedAt,omitempty"`
	// Servers lists each server's hash (16 hex digits), or why it gave
	// none.
	Servers []ServerStateHash `json:"servers"`
	// Diverged names the servers whose hash differs from the most common
	// one (all of them, when no hash is the most common).
	Diverged []string `json:"diverged,omitempty"`
}

// ServerStateHash is one server's part of a StateHashReport.
type ServerStateHash struct {
	ID    string `json:"id"`
	Hash  string `json:"hash,omitempty"`
	Error string `json:"error,omitempty"`
}
