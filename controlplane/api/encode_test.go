package api

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
)

// engineMarshal is what Marshal wrote before the generated encoder: the
// reflective engine with encoding/json's semantics.
func engineMarshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := jsonv2.Marshal(v, v1Options)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAppendStringJSONEscapes checks the generated encoder's strings
// against the engine (and encoding/json, for valid UTF-8) for every byte
// alone and in company, every rune up to U+FFFF and the special ones
// above.
func TestAppendStringJSONEscapes(t *testing.T) {
	var cases []string
	for c := range 256 {
		cases = append(cases, string([]byte{byte(c)}), "a"+string([]byte{byte(c)})+"z")
	}
	for r := rune(0); r <= 0xFFFF; r++ {
		cases = append(cases, "x"+string(r))
	}
	cases = append(cases, "", "\U0001F600", "a\u2028b\u2029c", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x80", "é\xff<&>\"\\\x7f")
	for _, s := range cases {
		got := appendStringJSON(nil, s)
		if want := engineMarshal(t, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: wrote %s, the engine %s", s, got, want)
		}
		// encoding/json itself escapes the U+FFFD that stands for invalid
		// UTF-8; the engine writes it as is, and so do stored objects.
		if std, _ := json.Marshal(s); utf8.ValidString(s) && !bytes.Equal(got, std) {
			t.Fatalf("%q: wrote %s, encoding/json %s", s, got, std)
		}
	}
}

// TestGeneratedEncoderSameBytes encodes random pods, sparse and full,
// with the generated encoder and with the engine, and requires the same
// bytes: stored pods, snapshots and the servers' state hashes hold what
// the engine wrote.
func TestGeneratedEncoderSameBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	for i := range 3000 {
		var p Pod
		fill(rng, reflect.ValueOf(&p).Elem(), float64(i%10)/10, 0)
		got, err := Marshal(&p)
		if err != nil {
			t.Fatal(err)
		}
		if want := engineMarshal(t, &p); !bytes.Equal(got, want) {
			t.Fatalf("pod %d:\ngenerated %s\nengine    %s", i, got, want)
		}
		prefix := []byte("prefix")
		got, err = MarshalAppend(prefix, &p)
		if err != nil || !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], engineMarshal(t, &p)) {
			t.Fatalf("MarshalAppend of pod %d: %s, %v", i, got, err)
		}
	}
	// A nil pod is the engine's.
	if got, err := Marshal((*Pod)(nil)); err != nil || string(got) != "null" {
		t.Fatalf("nil pod: %s, %v", got, err)
	}
}

var (
	randStrings = []string{"", "a", "web", "team-1", "<b>&amp;</b>", "line\nbreak\ttab", "quote\"back\\slash", "\u2028\u2029", "é中文\U0001F600", "\xff\xfe bad", "\x00\x1f\x7f", strings.Repeat("x", 600)}
	randQuants  = []string{"0", "100m", "1", "500Mi", "1.5Gi", "2e3", "-1", "64Ki", "0.5"}
)

// fill sets v to a random value: with probability sparse a field stays
// zero, and pointers, slices and maps are nil or empty at random.
func fill(rng *rand.Rand, v reflect.Value, sparse float64, depth int) {
	switch v.Type() {
	case timeType:
		switch rng.IntN(4) {
		case 0:
			v.Set(reflect.ValueOf(Time{}))
		case 1:
			v.Set(reflect.ValueOf(Time{time.Date(2026, 11, 27, 15, 4, 5, 0, time.FixedZone("x", 3600))}))
		default:
			v.Set(reflect.ValueOf(*NewTime(time.Unix(rng.Int64N(4e9), 0))))
		}
		return
	case quantityType:
		v.Set(reflect.ValueOf(MustParseQuantity(randQuants[rng.IntN(len(randQuants))])))
		return
	}
	if rng.Float64() < sparse || depth > 12 {
		return
	}
	switch v.Kind() {
	case reflect.String:
		s := randStrings[rng.IntN(len(randStrings))]
		if rng.IntN(3) == 0 {
			s += string(rune(rng.IntN(0x3000)))
		}
		v.SetString(s)
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n := rng.Int64()
		if rng.IntN(2) == 0 {
			n = rng.Int64N(100) - 50
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(rng.Uint64())
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(rng, p.Elem(), sparse, depth+1)
		v.Set(p)
	case reflect.Slice:
		n := rng.IntN(4)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(rng, s.Index(i), sparse, depth+1)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range rng.IntN(5) {
			k := reflect.New(v.Type().Key()).Elem()
			k.SetString(randStrings[rng.IntN(len(randStrings))] + string(rune('a'+rng.IntN(26))))
			e := reflect.New(v.Type().Elem()).Elem()
			fill(rng, e, sparse, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(rng, v.Field(i), sparse, depth+1)
			}
		}
	}
}

// FuzzGeneratedEncoder drives TestGeneratedEncoderSameBytes's comparison
// from the fuzzer's seeds.
func FuzzGeneratedEncoder(f *testing.F) {
	f.Add(uint64(1), uint8(5), "")
	f.Add(uint64(2), uint8(0), "\xff<\u2028")
	f.Fuzz(func(t *testing.T, seed uint64, sparse uint8, s string) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var p Pod
		fill(rng, reflect.ValueOf(&p).Elem(), float64(sparse%10)/10, 0)
		p.Name, p.Labels = s, map[string]string{s: s}
		if !utf8.ValidString(s) {
			p.Annotations = map[string]string{"k": s}
		}
		got, err := Marshal(&p)
		if err != nil {
			t.Fatal(err)
		}
		if want := engineMarshal(t, &p); !bytes.Equal(got, want) {
			t.Fatalf("generated %s\nengine    %s", got, want)
		}
	})
}

// BenchmarkEncodePod compares the generated encoder with the engine on a
// small pod as a client creates it and the store keeps it.
func BenchmarkEncodePod(b *testing.B) {
	at := NewTime(time.Date(2026, 11, 27, 15, 0, 0, 0, time.UTC))
	p := &Pod{
		TypeMeta: TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: ObjectMeta{
			Name: "p1", Namespace: "bench", UID: "0f3c1a2b-1111-2222-3333-444455556666", ResourceVersion: "12345",
			CreationTimestamp: at,
			Labels:            map[string]string{"app": "bench", "tier": "load"},
			Annotations:       map[string]string{"bench.outpost.io/padding": strings.Repeat("x", 520)},
		},
		Spec: PodSpec{Containers: []Container{{
			Name: "app", Image: "registry.local/bench/app:1.0",
			Command: []string{"/app", "--serve"},
			Resources: ResourceRequirements{Requests: ResourceList{
				"cpu": MustParseQuantity("100m"), "memory": MustParseQuantity("500Mi")}},
		}}},
	}
	SetDefaults(p)
	b.Run("generated", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 4096)
		for b.Loop() {
			buf, _ = MarshalAppend(buf[:0], p)
		}
	})
	b.Run("engine", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = jsonv2.Marshal(p, v1Options)
		}
	})
}

// BenchmarkMarshalPod is Marshal's cost for that pod: a fresh slice of
// its size, as the store keeps.
func BenchmarkMarshalPod(b *testing.B) {
	p := &Pod{ObjectMeta: ObjectMeta{Name: "p1", Namespace: "bench", Annotations: map[string]string{"pad": strings.Repeat("x", 520)}},
		Spec: PodSpec{Containers: []Container{{Name: "app", Image: "registry.local/bench/app:1.0"}}}}
	SetDefaults(p)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Marshal(p)
	}
}
