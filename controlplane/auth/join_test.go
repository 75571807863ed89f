package auth

import (
	"errors"
	"strings"
	"testing"
)

func TestJoinStringRoundTrip(t *testing.T) {
	id, secret := NewToken()
	pin := "sha256:" + strings.Repeat("ab", 32)
	s := FormatJoin(pin, id+"."+secret)
	gotPin, gotTok, err := ParseJoin(" " + s + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if gotPin != pin || gotTok != id+"."+secret {
		t.Fatalf("ParseJoin(%q) = %q, %q", s, gotPin, gotTok)
	}
}

func TestParseJoinRefusals(t *testing.T) {
	id, secret := NewToken()
	tok := id + "." + secret
	pin := "sha256:" + strings.Repeat("ab", 32)
	for _, tc := range []struct{ in, want string }{
		{tok, "starts with"},
		{"OP1::" + pin, "<pin>::<id>.<secret>"},
		{"OP1::sha256:abcd::" + tok, "64 hex digits"},
		{"OP1::md5:" + strings.Repeat("ab", 32) + "::" + tok, "64 hex digits"},
		{"OP1::" + pin + "::nodot", "token"},
	} {
		_, _, err := ParseJoin(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseJoin(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
		if err != nil && !errors.Is(err, ErrInvalidToken) {
			t.Errorf("ParseJoin(%q): %v does not wrap ErrInvalidToken", tc.in, err)
		}
	}
}
