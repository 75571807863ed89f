package gossip

import (
	"crypto/hkdf"
	"crypto/sha256"
)

// KeyLen is the length of a gossip key: AES-256.
const KeyLen = 32

// keyInfo separates the gossip key from the other keys derived from the
// same cluster secret (the CA's, the admin token's): knowing the gossip
// key, which every agent holds, tells nothing about them.
const keyInfo = "outpost gossip key v1"

// KeyFromSecret derives the pool's AES-256 key from the cluster secret.
// Every server has the secret, so every server derives the same key
// without an exchange; agents receive it in their join reply.
func KeyFromSecret(clusterSecret string) []byte {
	key, err := hkdf.Key(sha256.New, []byte(clusterSecret), nil, keyInfo, KeyLen)
	if err != nil {
		// hkdf.Key fails only for a length beyond 255 hash blocks or a
		// FIPS-only restriction on short secrets; neither applies to
		// 32 bytes of SHA-256 output, so this is unreachable.
		return nil
	}
	return key
}
