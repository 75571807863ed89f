package pki

import (
	"crypto/rand"
	"encoding/base64"
)

// GenerateSecret returns a new random cluster secret: 32 bytes from
// crypto/rand in unpadded URL-safe base64, 43 characters, safe in URLs,
// flags and file names.
func GenerateSecret() string {
	var b [32]byte
	// crypto/rand.Read never returns an error; it crashes the program
	// if the system's source fails.
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
