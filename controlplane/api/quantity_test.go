package api

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestParseQuantity(t *testing.T) {
	tests := []struct {
		in    string
		milli int64
		value int64
	}{
		{"100m", 100, 1},
		{"500Mi", 500 << 20 * 1000, 500 << 20},
		{"4", 4000, 4},
		{"1e3", 1_000_000, 1000},
		{"0.5", 500, 1},
		{"1.5Gi", 3 << 29 * 1000, 3 << 29},
		{"2k", 2_000_000, 2000},
		{"0.1m", 1, 1},   // sub-milli rounds up
		{"-1.5m", -1, 0}, // toward +inf as well
		{"+7", 7000, 7},
		{"250u", 1, 1},
		{"1E2", 100_000, 100},
		{"1e-3", 1, 1},
		{"8Pi", 8 << 50 * 1000, 8 << 50},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			q, err := ParseQuantity(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if q.MilliValue() != tt.milli || q.Value() != tt.value {
				t.Errorf("milli %d value %d, want %d %d", q.MilliValue(), q.Value(), tt.milli, tt.value)
			}
			if q.String() != tt.in {
				t.Errorf("String() = %q, want the input back", q.String())
			}
		})
	}
	for _, bad := range []string{"", "m", "1.2.3", "abc", "1x", "--1", "1e", "1e100", ".", "9223372036854776"} {
		if q, err := ParseQuantity(bad); err == nil {
			t.Errorf("ParseQuantity(%q) = %v, want an error", bad, q)
		}
	}
	if _, err := ParseQuantity("1Zi"); !errors.Is(err, ErrQuantity) {
		t.Errorf("error %v, want ErrQuantity", err)
	}
}

func TestQuantityJSON(t *testing.T) {
	var rl ResourceList
	if err := json.Unmarshal([]byte(`{"cpu":"250m","memory":"64Mi","pods":110,"x":" 2 ","esc":"\u0031"}`), &rl); err != nil {
		t.Fatal(err)
	}
	if rl["cpu"].MilliValue() != 250 || rl["memory"].Value() != 64<<20 || rl["pods"].Value() != 110 || rl["x"].Value() != 2 || rl["esc"].Value() != 1 {
		t.Errorf("decoded %v", rl)
	}
	b, err := json.Marshal(rl)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"cpu":"250m","esc":"1","memory":"64Mi","pods":"110","x":"2"}` {
		t.Errorf("encoded %s", b)
	}
	if NewMilliQuantity(1500).String() != "1500m" || NewQuantity(3).String() != "3" {
		t.Errorf("constructors write %q %q", NewMilliQuantity(1500), NewQuantity(3))
	}
}

// TestParseMilliFastAgrees checks the integer fast path against exact
// rational arithmetic.
func TestParseMilliFastAgrees(t *testing.T) {
	for _, s := range []string{"5.", ".5", "-.5", "0.0001", "-0.0001", "1.000000001", "9223372036854775",
		"9.2P", "8Pi", "7.99Pi", "123456789.123456789Ki", "0m", "-0", "1.5m", "999999999999999999m"} {
		fast, ok := parseMilliFast(s)
		exact, err := parseMilliExact(s)
		if ok && (err != nil || exact != fast) {
			t.Errorf("%q: fast %d, exact %d (%v)", s, fast, exact, err)
		}
	}
}

func BenchmarkParseQuantity(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseQuantity("1.5Gi"); err != nil {
			b.Fatal(err)
		}
	}
}
