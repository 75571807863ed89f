package auth

import (
	"errors"
	"strings"
	"testing"
)

func TestNewTokenParses(t *testing.T) {
	id, secret := NewToken()
	if len(id) != IDLen || len(secret) != SecretLen {
		t.Fatalf("NewToken lengths %d.%d, want %d.%d", len(id), len(secret), IDLen, SecretLen)
	}
	gid, gsecret, err := ParseToken(id + "." + secret)
	if err != nil || gid != id || gsecret != secret {
		t.Fatalf("ParseToken(NewToken) = %q, %q, %v", gid, gsecret, err)
	}
	id2, secret2 := NewToken()
	if id2 == id && secret2 == secret {
		t.Fatal("two NewToken calls returned the same token")
	}
}

func TestParseToken(t *testing.T) {
	for _, tc := range []struct {
		in   string
		ok   bool
		hint string
	}{
		{"abc123.0123456789abcdef", true, ""},
		{"abc123." + strings.Repeat("a", MaxSecretLen), true, ""},
		{"", false, "<id>.<secret>"},
		{"abc1230123456789abcdef", false, "<id>.<secret>"},
		{"abc12.0123456789abcdef", false, "id"},
		{"abc1234.0123456789abcdef", false, "id"},
		{"ABC123.0123456789abcdef", false, "id"},
		{"abc-12.0123456789abcdef", false, "id"},
		{"abc123.0123456789abcde", false, "secret"},
		{"abc123.0123456789ABCDEF", false, "secret"},
		{"abc123.0123456789abcdef.x", false, "secret"},
		{"abc123." + strings.Repeat("a", MaxSecretLen+1), false, "secret"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			_, _, err := ParseToken(tc.in)
			if tc.ok {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), tc.hint) {
				t.Fatalf("err = %v, want ErrInvalidToken naming %q", err, tc.hint)
			}
			if _, secret, ok := strings.Cut(tc.in, "."); ok && len(secret) > 3 && strings.Contains(err.Error(), secret) {
				t.Fatalf("error %q echoes the secret", err)
			}
		})
	}
}

func TestHashSecret(t *testing.T) {
	// SHA-256 of "abc" (FIPS 180-2 example).
	const want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got := HashSecret("abc"); got != want {
		t.Fatalf("HashSecret(abc) = %s, want %s", got, want)
	}
}

func TestAdminToken(t *testing.T) {
	const secret = "0123456789abcdefghijklmnopqrstuvwxyz-secret"
	id, sec := AdminToken(secret)
	id2, sec2 := AdminToken(secret)
	if id != id2 || sec != sec2 {
		t.Fatal("AdminToken is not deterministic")
	}
	if _, _, err := ParseToken(id + "." + sec); err != nil {
		t.Fatalf("admin token does not parse: %v", err)
	}
	if len(sec) < 32 {
		t.Fatalf("admin secret has %d characters, want 32+", len(sec))
	}
	oid, osec := AdminToken(secret + "x")
	if oid == id || osec == sec {
		t.Fatal("different cluster secrets gave overlapping admin tokens")
	}
}

// Every generation of the admin token keeps the id and has its own
// secret; generation 0 is AdminToken's.
func TestAdminTokenGeneration(t *testing.T) {
	const secret = "0123456789abcdefghijklmnopqrstuvwxyz-secret"
	id0, sec0 := AdminToken(secret)
	seen := map[string]int{}
	for gen := range 4 {
		id, sec := AdminTokenGeneration(secret, gen)
		if id != id0 {
			t.Errorf("generation %d has id %s, want %s", gen, id, id0)
		}
		if gen == 0 && sec != sec0 {
			t.Error("generation 0 is not AdminToken's secret")
		}
		if prev, dup := seen[sec]; dup {
			t.Errorf("generations %d and %d share a secret", prev, gen)
		}
		seen[sec] = gen
		if _, again := AdminTokenGeneration(secret, gen); again != sec {
			t.Errorf("generation %d is not deterministic", gen)
		}
		if _, _, err := ParseToken(id + "." + sec); err != nil || len(sec) < 32 {
			t.Errorf("generation %d: %v (secret of %d characters)", gen, err, len(sec))
		}
	}
}
