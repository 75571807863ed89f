package auth

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// joinPrefix starts a join string; the number is its format's version.
const joinPrefix = "OP1::"

// FormatJoin makes the join string an agent is started with: the cluster
// CA's pin (pki's "sha256:<hex>") and a join token, "OP1::sha256:<hex>::
// <id>.<secret>". Like kubeadm's --discovery-token-ca-cert-hash, the pin
// lets the agent trust the cluster CA it is shown without a copy of it.
func FormatJoin(pin, token string) string {
	return joinPrefix + pin + "::" + token
}

// ParseJoin splits a join string into the CA pin and the token.
func ParseJoin(s string) (pin, token string, err error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), joinPrefix)
	if !ok {
		return "", "", fmt.Errorf("%w: a join string starts with %q (outpost adm token create --role node prints one)", ErrInvalidToken, joinPrefix)
	}
	pin, token, ok = strings.Cut(rest, "::")
	if !ok {
		return "", "", fmt.Errorf("%w: a join string is %s<pin>::<id>.<secret>", ErrInvalidToken, joinPrefix)
	}
	h, ok := strings.CutPrefix(pin, "sha256:")
	if b, err := hex.DecodeString(h); !ok || err != nil || len(b) != 32 {
		return "", "", fmt.Errorf("%w: the join string's CA pin must be sha256: and 64 hex digits", ErrInvalidToken)
	}
	if _, _, err := ParseToken(token); err != nil {
		return "", "", fmt.Errorf("the join string's token: %w", err)
	}
	return pin, token, nil
}
