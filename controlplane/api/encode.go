package api

import "unicode/utf8"

// Pods are most of what the control plane encodes: the leader encodes
// each write's command, a snapshot every stored pod whose JSON was let
// go, a client each pod it sends. The reflective engine spends about
// 3.8 µs on a small pod, most of it walking its own state machine;
// zz_generated_encode.go writes the same bytes from code generated from
// the types (encode_gen_test.go) in about 0.9 µs. Tests compare the two
// on random pods (TestGeneratedEncoderSameBytes, FuzzGeneratedEncoder).
// Nodes and events, the next most common, go the same way
// (generatedTypes). decode_fast.go is the way back.

// appendMember appends a member's quoted name and colon, after a comma
// unless it is the first since start.
func appendMember(b []byte, start int, name string) []byte {
	if len(b) != start {
		b = append(b, ',')
	}
	return append(b, name...)
}

const hexDigits = "0123456789abcdef"

// unescaped marks the ASCII bytes a JSON string holds as they are.
var unescaped = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendStringJSON appends s as a JSON string the way encoding/json
// escapes it: quote, backslash and control characters, <, > and & (for
// HTML), U+2028 and U+2029 (for JavaScript), and each byte of invalid
// UTF-8 replaced by U+FFFD.
func appendStringJSON(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if unescaped[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, "\ufffd"...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
