package host

import (
	"errors"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

func TestParseThresholdsGood(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want []Threshold
	}{
		{"", nil},
		{"  ", nil},
		{"memory.available<100Mi", []Threshold{{Signal: SignalMemoryAvailable, Quantity: api.MustParseQuantity("100Mi")}}},
		{
			"memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%,pid.available<5%",
			[]Threshold{
				{Signal: SignalMemoryAvailable, Quantity: api.MustParseQuantity("100Mi")},
				{Signal: SignalNodeFSAvailable, Percentage: 10, Percent: true},
				{Signal: SignalNodeFSInodesFree, Percentage: 5, Percent: true},
				{Signal: SignalImageFSAvailable, Percentage: 15, Percent: true},
				{Signal: SignalPIDAvailable, Percentage: 5, Percent: true},
			},
		},
		{" imagefs.inodesFree < 1k , pid.available<2.5% ", []Threshold{
			{Signal: SignalImageFSInodesFree, Quantity: api.MustParseQuantity("1k")},
			{Signal: SignalPIDAvailable, Percentage: 2.5, Percent: true},
		}},
		{"nodefs.available<0%,memory.available<0", []Threshold{
			{Signal: SignalNodeFSAvailable, Percent: true},
			{Signal: SignalMemoryAvailable, Quantity: api.MustParseQuantity("0")},
		}},
		{"nodefs.available<100%", []Threshold{{Signal: SignalNodeFSAvailable, Percentage: 100, Percent: true}}},
	} {
		got, err := ParseThresholds(tc.spec)
		if err != nil {
			t.Errorf("ParseThresholds(%q): %v", tc.spec, err)
			continue
		}
		if !equalThresholds(got, tc.want) {
			t.Errorf("ParseThresholds(%q) = %v, want %v", tc.spec, got, tc.want)
		}
		// What String writes, ParseThresholds reads back the same.
		again, err := ParseThresholds(FormatThresholds(got))
		if err != nil || !equalThresholds(again, got) {
			t.Errorf("round trip of %q through %q = %v, %v", tc.spec, FormatThresholds(got), again, err)
		}
	}
}

func equalThresholds(a, b []Threshold) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Signal != b[i].Signal || a[i].Percent != b[i].Percent || a[i].Percentage != b[i].Percentage ||
			a[i].Quantity.MilliValue() != b[i].Quantity.MilliValue() {
			return false
		}
	}
	return true
}

func TestParseThresholdsBad(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want []string // every one must be in the error
	}{
		{"memory.free<100Mi", []string{`item 1 "memory.free<100Mi": unknown signal "memory.free"`}},
		{"memory.available>100Mi", []string{`operator ">" is not supported, only <`}},
		{"memory.available<=100Mi", []string{`operator "<=" is not supported`}},
		{"memory.available=100Mi", []string{`operator "=" is not supported`}},
		{"memory.available!=100Mi", []string{`operator "!=" is not supported`}},
		{"memory.available", []string{"no operator"}},
		{"memory.available<", []string{"missing value"}},
		{"<100Mi", []string{"missing signal"}},
		{"nodefs.available<101%", []string{"percentage must be 0-100%"}},
		{"nodefs.available<-1%", []string{"percentage must be 0-100%"}},
		{"nodefs.available<NaN%", []string{"percentage must be 0-100%"}},
		{"nodefs.available<Inf%", []string{"percentage must be 0-100%"}},
		{"nodefs.available<ten%", []string{`percentage "ten%" is not a number`}},
		{"memory.available<-100Mi", []string{"must not be negative"}},
		{"memory.available<100Mx", []string{`value "100Mx" is neither a quantity nor a percentage`}},
		{"memory.available<1Gi,memory.available<2Gi", []string{`item 2 "memory.available<2Gi": duplicate signal "memory.available"`}},
		{"memory.available<1Gi,,nodefs.available<1%", []string{"item 2 \"\": empty item"}},
		{"memory.available<1Gi,", []string{"item 2 \"\": empty item"}},
		// Every bad item is listed, not only the first.
		{"cpu.available<1,memory.available<1Gi,nodefs.available<200%,pid.available>5", []string{
			`item 1 "cpu.available<1": unknown signal "cpu.available"`,
			`item 3 "nodefs.available<200%": percentage must be 0-100%`,
			`item 4 "pid.available>5": operator ">" is not supported`,
		}},
	} {
		got, err := ParseThresholds(tc.spec)
		if err == nil {
			t.Errorf("ParseThresholds(%q) = %v, want an error", tc.spec, got)
			continue
		}
		if !errors.Is(err, ErrThreshold) {
			t.Errorf("ParseThresholds(%q): %v does not wrap ErrThreshold", tc.spec, err)
		}
		if got != nil {
			t.Errorf("ParseThresholds(%q) returned %v with its error", tc.spec, got)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("ParseThresholds(%q) error\n  %v\nlacks %q", tc.spec, err, w)
			}
		}
	}
	// The good item between bad ones is not mentioned.
	_, err := ParseThresholds("x<1,memory.available<1Gi,y<2")
	if err == nil || strings.Contains(err.Error(), "item 2") {
		t.Errorf("error %v names the good item 2", err)
	}
}

func TestDefaultThresholds(t *testing.T) {
	want := "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%"
	if got := FormatThresholds(DefaultThresholds()); got != want {
		t.Errorf("DefaultThresholds = %s, want %s", got, want)
	}
	d := DefaultThresholds()
	d[0].Signal = "changed"
	if DefaultThresholds()[0].Signal != SignalMemoryAvailable {
		t.Error("changing the returned slice changed the defaults")
	}
}

func TestThresholdLimit(t *testing.T) {
	for _, tc := range []struct {
		spec  string
		total int64
		want  int64
	}{
		{"memory.available<100Mi", 1 << 40, 100 << 20},
		{"memory.available<100Mi", 0, 100 << 20}, // an amount does not depend on the total
		{"nodefs.available<10%", 1000, 100},
		{"nodefs.available<10%", 1005, 100}, // truncated, as the kubelet does
		{"nodefs.available<0%", 1000, 0},
		{"nodefs.available<100%", 1000, 1000},
		{"pid.available<2.5%", 32768, 819},
		{"nodefs.inodesFree<1k", 10, 1000},
		{"nodefs.available<100%", 1<<63 - 1, 1<<63 - 1}, // no overflow
	} {
		ts, err := ParseThresholds(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := ts[0].Limit(tc.total); got != tc.want {
			t.Errorf("%s of %d = %d, want %d", tc.spec, tc.total, got, tc.want)
		}
	}
}

// FuzzParseThresholds: no input panics, and what parses writes back to
// a spec that parses to the same thresholds.
func FuzzParseThresholds(f *testing.F) {
	for _, s := range []string{
		"memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%,pid.available<5%",
		"memory.available<1e3", "nodefs.available<0x1p3%", "pid.available<<5", "<", "%", ",,,", "memory.available<9223372036854775807",
		"imagefs.inodesFree<1Ei", "nodefs.available<5.5.5%", "memory.available< 1Gi ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		ts, err := ParseThresholds(spec)
		if err != nil {
			if !errors.Is(err, ErrThreshold) {
				t.Fatalf("error %v does not wrap ErrThreshold", err)
			}
			return
		}
		for _, th := range ts {
			_ = th.Limit(1 << 40)
			if th.Percent && !(th.Percentage >= 0 && th.Percentage <= 100) {
				t.Fatalf("%q parsed to percentage %v", spec, th.Percentage)
			}
			if !th.Percent && th.Quantity.MilliValue() < 0 {
				t.Fatalf("%q parsed to negative %v", spec, th.Quantity)
			}
		}
		again, err := ParseThresholds(FormatThresholds(ts))
		if err != nil || !equalThresholds(again, ts) {
			t.Fatalf("%q → %q → %v, %v", spec, FormatThresholds(ts), again, err)
		}
	})
}
