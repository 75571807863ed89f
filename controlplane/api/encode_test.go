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

// TestGeneratedEncoderSameBytes encodes random objects of every
// generated type, sparse and full, with the generated encoder and with
// the engine, and requires the same bytes: stored objects, snapshots and
// the servers' state hashes hold what the engine wrote.
func TestGeneratedEncoderSameBytes(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (a failure replays with it in place of time.Now)", seed)
	rng := rand.New(rand.NewPCG(1, seed))
	for _, typ := range generatedTypes {
		for i := range 2000 {
			v := reflect.New(typ)
			fill(rng, v.Elem(), float64(i%10)/10, 0)
			got, err := Marshal(v.Interface())
			if err != nil {
				t.Fatal(err)
			}
			want := engineMarshal(t, v.Interface())
			if !bytes.Equal(got, want) {
				t.Fatalf("%s %d:\ngenerated %s\nengine    %s", typ.Name(), i, got, want)
			}
			prefix := []byte("prefix")
			got, err = MarshalAppend(prefix, v.Interface())
			if err != nil || !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want) {
				t.Fatalf("MarshalAppend of %s %d: %s, %v", typ.Name(), i, got, err)
			}
		}
		// A nil one is the engine's.
		if got, err := Marshal(reflect.Zero(reflect.PointerTo(typ)).Interface()); err != nil || string(got) != "null" {
			t.Fatalf("nil %s: %s, %v", typ.Name(), got, err)
		}
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
// from the fuzzer's seeds, a string put in the metadata's names.
func FuzzGeneratedEncoder(f *testing.F) {
	f.Add(uint64(1), uint8(5), "")
	f.Add(uint64(2), uint8(0), "\xff<\u2028")
	f.Fuzz(func(t *testing.T, seed uint64, sparse uint8, s string) {
		rng := rand.New(rand.NewPCG(seed, 7))
		for _, typ := range generatedTypes {
			v := reflect.New(typ)
			fill(rng, v.Elem(), float64(sparse%10)/10, 0)
			m := v.Interface().(Object).GetObjectMeta()
			m.Name, m.Labels, m.Annotations = s, map[string]string{s: s}, map[string]string{"k": s}
			got, err := Marshal(v.Interface())
			if err != nil {
				t.Fatal(err)
			}
			if want := engineMarshal(t, v.Interface()); !bytes.Equal(got, want) {
				t.Fatalf("%s: generated %s\nengine    %s", typ.Name(), got, want)
			}
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

// decodeBoth decodes data into a typ with Unmarshal (the generated
// decoder first) and with the engine alone, and fails unless both give
// the same object or both refuse it; likewise strictly.
func decodeBoth(t testing.TB, typ reflect.Type, data []byte) {
	t.Helper()
	got, want := reflect.New(typ).Interface(), reflect.New(typ).Interface()
	gotErr, wantErr := Unmarshal(data, got), jsonv2.Unmarshal(data, want, v1Options)
	if (gotErr == nil) != (wantErr == nil) || !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\nUnmarshal %+v, %v\nengine    %+v, %v", data, got, gotErr, want, wantErr)
	}
	sgot, swant := reflect.New(typ).Interface(), reflect.New(typ).Interface()
	gotOK, wantOK := strictUnmarshal(data, sgot), jsonv2.Unmarshal(data, swant, strictOptions) == nil
	if gotOK != wantOK || gotOK && !reflect.DeepEqual(sgot, swant) {
		t.Fatalf("%s:\nstrictUnmarshal %v %+v\nengine          %v %+v", data, gotOK, sgot, wantOK, swant)
	}
}

// TestGeneratedDecoderSameObjects decodes random objects of every
// generated type as the encoder writes them, and variants a client or a
// hand may write (spacing, escapes, names in another case, nulls,
// unknown and repeated members, numbers out of range, cut short), with
// the generated decoder and with the engine: the same object or the
// same refusal every time.
func TestGeneratedDecoderSameObjects(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (a failure replays with it in place of time.Now)", seed)
	rng := rand.New(rand.NewPCG(3, seed))
	variants := []func(string) string{
		func(s string) string { return s },
		func(s string) string { return strings.ReplaceAll(s, ",", " ,\n\t") },
		func(s string) string { return strings.ReplaceAll(s, ":", " : ") },
		func(s string) string { return strings.Replace(s, `"name":`, `"Name":`, 1) },
		func(s string) string { return strings.Replace(s, `"name":`, `"n\u0061me":`, 1) },
		func(s string) string { return strings.Replace(s, `{"name":"`, `{"name":null,"name":"`, 1) },
		func(s string) string { return strings.Replace(s, `"metadata":{`, `"metadata":{"bogus":1,`, 1) },
		func(s string) string { return strings.Replace(s, `"labels":{`, `"labels":{"dup":"a","dup":"b",`, 1) },
		func(s string) string { return strings.Replace(s, `"name":"`, `"name":"\u00e9\ud83d\ude00\n\/`, 1) },
		func(s string) string { return strings.Replace(s, `"name":"`, `"name":"\ud800`, 1) },
		func(s string) string { return strings.Replace(s, `"priority":`, `"priority":99999999999`, 1) },
		func(s string) string { return strings.Replace(s, `"count":`, `"count":1.0,"x":`, 1) },
		func(s string) string { return strings.Replace(s, `"count":`, `"count":-0,"x":`, 1) },
		func(s string) string {
			return strings.Replace(s, `"containers":[`, `"containers":null,"containers":[`, 1)
		},
		func(s string) string { return strings.Replace(s, `"spec":{`, `"spec":null,"spec2":{`, 1) },
		func(s string) string { return strings.Replace(s, `"unschedulable":`, `"unschedulable":null,"x":`, 1) },
		func(s string) string { return s[:len(s)/2] },
		func(s string) string { return s + " " },
		func(s string) string { return s + "{}" },
		func(s string) string { return strings.Replace(s, `"cpu":"`, `"cpu":"1`, 1) },
		func(s string) string { return strings.Replace(s, `"cpu":"`, `"cpu":3,"x":"`, 1) },
		func(s string) string { return strings.Replace(s, `[]`, `[ ]`, 1) },
		// The encoder never writes these, so without them the guards
		// against invalid UTF-8 and leading zeros were never reached.
		func(s string) string { return strings.Replace(s, `":"`, "\":\"\xff", 1) },
		func(s string) string { return strings.Replace(s, `":"`, "\":\"\xed\xa0\x80", 1) },
		func(s string) string { return strings.Replace(s, `":"`, `":"\u00e9`+"\xc3", 1) },
		func(s string) string { return strings.Replace(s, `":1`, `":01`, 1) },
		func(s string) string { return strings.Replace(s, `":-`, `":-0`, 1) },
		func(s string) string { return strings.Replace(s, `":1`, `":-0`, 1) },
		func(s string) string { return strings.Replace(s, `{}`, `{ }`, 1) },
	}
	for _, typ := range generatedTypes {
		for i := range 1500 {
			v := reflect.New(typ)
			fill(rng, v.Elem(), float64(i%10)/10, 0)
			data, err := Marshal(v.Interface())
			if err != nil {
				t.Fatal(err)
			}
			if !decodeGenerated(data, reflect.New(typ).Interface()) && !v.Elem().IsZero() {
				t.Fatalf("the generated decoder gave up on the encoder's own %s", data)
			}
			for _, vary := range variants {
				decodeBoth(t, typ, []byte(vary(string(data))))
			}
		}
		for _, s := range []string{``, `null`, `{}`, `[]`, `{"metadata":{}}`, `{"spec":{"containers":[]}}`, `{"metadata":{"labels":{}}}`, `{"status":{"phase":"Running"}} x`} {
			decodeBoth(t, typ, []byte(s))
		}
	}
}

// TestGeneratedDecoderOnlyIntoZero checks that decoding into a pod that
// holds something is the engine's merge, not a fresh pod.
func TestGeneratedDecoderOnlyIntoZero(t *testing.T) {
	p := Pod{ObjectMeta: ObjectMeta{Name: "kept", Labels: map[string]string{"a": "1"}}}
	if err := Unmarshal([]byte(`{"metadata":{"labels":{"b":"2"}}}`), &p); err != nil {
		t.Fatal(err)
	}
	if p.Name != "kept" || p.Labels["a"] != "1" || p.Labels["b"] != "2" {
		t.Fatalf("decoded into a set pod: %+v, want the engine's merge", p.ObjectMeta)
	}
}

// BenchmarkDecodePodGenerated compares the generated decoder with the
// engine on the pod of BenchmarkEncodePod.
func BenchmarkDecodePodGenerated(b *testing.B) {
	p := &Pod{ObjectMeta: ObjectMeta{Name: "p1", Namespace: "bench", UID: "0f3c1a2b-1111-2222-3333-444455556666", ResourceVersion: "12345",
		Labels: map[string]string{"app": "bench", "tier": "load"}, Annotations: map[string]string{"bench.outpost.io/padding": strings.Repeat("x", 520)}},
		Spec: PodSpec{Containers: []Container{{Name: "app", Image: "registry.local/bench/app:1.0", Command: []string{"/app", "--serve"},
			Resources: ResourceRequirements{Requests: ResourceList{"cpu": MustParseQuantity("100m"), "memory": MustParseQuantity("500Mi")}}}}}}
	SetDefaults(p)
	data, _ := Marshal(p)
	b.Run("generated", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var q Pod
			if err := Unmarshal(data, &q); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("engine", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var q Pod
			_ = jsonv2.Unmarshal(data, &q, v1Options)
		}
	})
}

// FuzzGeneratedDecoder decodes arbitrary bytes both ways into every
// generated type: the generated decoder must give what the engine gives,
// or give up.
func FuzzGeneratedDecoder(f *testing.F) {
	p := Pod{ObjectMeta: ObjectMeta{Name: "p", Labels: map[string]string{"a": "b"}},
		Spec: PodSpec{Containers: []Container{{Name: "c", Image: "i", Command: []string{"x"},
			Resources: ResourceRequirements{Requests: ResourceList{"cpu": MustParseQuantity("1")}}}}}}
	SetDefaults(&p)
	seed, _ := Marshal(&p)
	f.Add(seed)
	f.Add([]byte(`{"metadata":{"name":"a\u00e9\ud83d\ude00","creationTimestamp":"2026-11-27T15:00:00Z"},"spec":{"priority":-3}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, typ := range generatedTypes {
			decodeBoth(t, typ, data)
		}
	})
}

// TestMarshalLetsGoOfHugeBuffers checks that a buffer grown by one huge
// object does not stay in Marshal's pool, held for the process's life.
func TestMarshalLetsGoOfHugeBuffers(t *testing.T) {
	p := &Pod{ObjectMeta: ObjectMeta{Name: "big", Annotations: map[string]string{"a": strings.Repeat("x", 4*maxScratch)}}}
	if _, err := Marshal(p); err != nil {
		t.Fatal(err)
	}
	bp := scratch.Get().(*[]byte)
	defer scratch.Put(bp)
	if cap(*bp) > maxScratch {
		t.Fatalf("the pool holds a buffer of %d bytes after a huge object, want at most %d", cap(*bp), maxScratch)
	}
}
