package store

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// filler builds random values of any API type, biased towards what
// canonicalize must get right: empty but non-nil maps and slices, nil and
// zero-valued pointers, zero quantities and times, sub-second times.
type filler struct {
	r     *rand.Rand
	depth int
}

var (
	quantityType    = reflect.TypeFor[api.Quantity]()
	timeType        = reflect.TypeFor[api.Time]()
	intOrStringType = reflect.TypeFor[api.IntOrString]()
)

func (f *filler) fill(v reflect.Value) {
	t := v.Type()
	switch t {
	case quantityType:
		qs := []string{"", "0", "100m", "1", "1.5", "500Mi", "2Gi", "1e3", "0.1"}
		if s := qs[f.r.IntN(len(qs))]; s != "" {
			v.Set(reflect.ValueOf(api.MustParseQuantity(s)))
		}
		return
	case timeType:
		switch f.r.IntN(4) {
		case 0: // zero
		case 1:
			v.Set(reflect.ValueOf(*api.NewTime(time.Unix(f.r.Int64N(4e9), 0))))
		default: // sub-second, local zone, monotonic reading
			v.Set(reflect.ValueOf(api.Time{Time: time.Now().Add(time.Duration(f.r.Int64N(1e15)))}))
		}
		return
	case intOrStringType:
		v.Set(reflect.ValueOf(api.IntOrString{IsString: f.r.IntN(2) == 0, IntVal: int32(f.r.IntN(3)), StrVal: []string{"", "http", "25%"}[f.r.IntN(3)]}))
		return
	}
	switch t.Kind() {
	case reflect.Bool:
		v.SetBool(f.r.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if f.r.IntN(3) > 0 {
			v.SetInt(int64(f.r.IntN(200)) - 20)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(f.r.IntN(200)))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(f.r.NormFloat64())
	case reflect.String:
		ss := []string{"", "a", "web-1", "ünïcode", "<html>&", `quo"te`, "line\nbreak"}
		v.SetString(ss[f.r.IntN(len(ss))])
	case reflect.Pointer:
		if f.r.IntN(3) == 0 || f.depth > 6 {
			return
		}
		p := reflect.New(t.Elem())
		f.depth++
		f.fill(p.Elem())
		f.depth--
		v.Set(p)
	case reflect.Slice:
		switch n := f.r.IntN(4); {
		case n == 0 || f.depth > 6:
		default:
			s := reflect.MakeSlice(t, n-1, n-1)
			f.depth++
			for i := range n - 1 {
				f.fill(s.Index(i))
			}
			f.depth--
			v.Set(s)
		}
	case reflect.Map:
		switch n := f.r.IntN(4); {
		case n == 0 || f.depth > 6:
		default:
			m := reflect.MakeMap(t)
			f.depth++
			for i := range n - 1 {
				k := reflect.New(t.Key()).Elem()
				k.SetString("k" + strconv.Itoa(i))
				e := reflect.New(t.Elem()).Elem()
				f.fill(e)
				m.SetMapIndex(k, e)
			}
			f.depth--
			v.Set(m)
		}
	case reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				f.fill(v.Field(i))
			}
		}
	}
}

// checkCanonical reports, for obj, whether canonicalize gives what an
// encode and decode give.
func checkCanonical(t *testing.T, r *api.Resource, obj api.Object) {
	t.Helper()
	enc, err := api.Marshal(obj)
	if err != nil {
		return // not encodable: never a command
	}
	want := r.New()
	if err := api.Unmarshal(enc, want); err != nil {
		t.Fatalf("%s: decoding its own encoding: %v\n%s", r.Kind, err, enc)
	}
	if !canonicalize(obj) {
		t.Fatalf("%s: canonicalize refused a value\n%s", r.Kind, enc)
	}
	if !reflect.DeepEqual(obj, want) {
		got, _ := api.Marshal(obj)
		t.Fatalf("%s: canonical value differs from the decoded one\nencoding: %s\ncanonical: %s\ngot  %#v\nwant %#v", r.Kind, enc, got, obj, want)
	}
}

// TestCanonicalizeMatchesDecode is what lets the leader's Apply keep the
// handler's object: for every kind, random values canonicalize to exactly
// (reflect.DeepEqual) what decoding their encoding gives a follower.
func TestCanonicalizeMatchesDecode(t *testing.T) {
	for _, r := range api.Resources {
		t.Run(r.Kind, func(t *testing.T) {
			if planOf(reflect.TypeOf(r.New()).Elem()) == nil {
				t.Fatalf("no canonical plan for %s: the leader would decode every create twice", r.Kind)
			}
			f := &filler{r: rand.New(rand.NewPCG(1, uint64(len(r.Kind))))}
			for range 400 {
				obj := r.New()
				f.fill(reflect.ValueOf(obj).Elem())
				checkCanonical(t, r, obj)
			}
		})
	}
}

// TestCanonicalizeDecodedCorpus runs the decoder's fuzz corpus through the
// handler's path (strict decode, defaults) and checks the result.
func TestCanonicalizeDecodedCorpus(t *testing.T) {
	files, _ := filepath.Glob("../api/testdata/fuzz/FuzzDecode/*")
	if len(files) == 0 {
		t.Skip("no decoder corpus")
	}
	checked := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		if len(lines) < 2 || !strings.HasPrefix(lines[1], "[]byte(") {
			continue
		}
		doc, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			continue
		}
		obj, _, err := api.Decode([]byte(doc))
		if err != nil {
			continue
		}
		api.SetDefaults(obj)
		checkCanonical(t, api.ResourceOf(obj), obj)
		checked++
	}
	t.Logf("%d corpus objects checked", checked)
}

// TestCanonicalizeRefuses covers values it cannot vouch for.
func TestCanonicalizeRefuses(t *testing.T) {
	p := &api.Pod{ObjectMeta: api.ObjectMeta{Name: "bad\xff"}}
	if canonicalize(p) {
		t.Error("canonicalize accepted a name that is not UTF-8 (the encoder would change it)")
	}
	var nilPod *api.Pod
	if canonicalize(nilPod) {
		t.Error("canonicalize accepted a nil object")
	}
}
