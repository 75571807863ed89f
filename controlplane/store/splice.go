package store

import (
	"bytes"
	"reflect"
	"strconv"
	"strings"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// A bind changes a few bytes of a pod of a kilobyte or more, and the
// scheduler binds thousands a second on every server: the new encoding is
// spliced from the stored one (changed members replaced or inserted where
// encoding/json would put them) instead of encoding the whole pod again.
// Only the status, which is small for a pod not yet bound, is encoded. The
// field orders come from the types, so a field added to them needs no
// change here; anything unexpected in the stored JSON makes the caller
// encode the pod the ordinary way.
var (
	podOrder  = jsonOrder(reflect.TypeFor[api.Pod]())
	metaOrder = jsonOrder(reflect.TypeFor[api.ObjectMeta]())
	specOrder = jsonOrder(reflect.TypeFor[api.PodSpec]())

	rankMetadata        = podOrder["metadata"]
	rankSpec            = podOrder["spec"]
	rankStatus          = podOrder["status"]
	rankResourceVersion = metaOrder["resourceVersion"]
	rankGeneration      = metaOrder["generation"]
	rankNodeName        = specOrder["nodeName"]
)

// jsonOrder maps the JSON member names of struct type t to their order in
// encoding/json's output; embedded structs without a name tag are inlined,
// as encoding/json does.
func jsonOrder(t reflect.Type) map[string]int {
	m := make(map[string]int)
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" || !f.IsExported() && !f.Anonymous {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			if name == "" {
				name = f.Name
			}
			m[name] = len(m)
		}
	}
	walk(t)
	return m
}

// member is one member of an encoded JSON object.
type member struct {
	rank  int // position of its name in the type's field order
	start int // where its key starts
	val   int // where its value starts
	end   int // where its value ends
}

// members appends to ms the members of the JSON object obj, which must be
// compact and hold only names of order, in order. It reports false if obj
// is not so.
func members(ms []member, obj []byte, order map[string]int) ([]member, bool) {
	n := len(obj)
	if n < 2 || obj[0] != '{' || obj[n-1] != '}' {
		return nil, false
	}
	if n == 2 {
		return ms, true
	}
	last := -1
	for i := 1; ; {
		if obj[i] != '"' {
			return nil, false
		}
		k := skipString(obj, i)
		if k < 0 || k >= n || obj[k] != ':' {
			return nil, false
		}
		rank, ok := order[string(obj[i+1:k-1])]
		if !ok || rank <= last {
			return nil, false
		}
		e := skipValue(obj, k+1)
		if e < 0 || e >= n {
			return nil, false
		}
		ms = append(ms, member{rank: rank, start: i, val: k + 1, end: e})
		last = rank
		switch {
		case e == n-1:
			return ms, true
		case obj[e] == ',':
			i = e + 1
		default:
			return nil, false
		}
	}
}

// skipString returns the end of the JSON string starting at b[i], or -1.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		// The quote ends the string unless an odd number of backslashes
		// escapes it.
		n := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
	}
	return -1
}

// skipValue returns the end of the compact JSON value starting at b[i],
// or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e := skipString(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	// A number, true, false or null.
	j := i
	for j < len(b) && (b[j] >= '0' && b[j] <= '9' || b[j] >= 'a' && b[j] <= 'z' || b[j] == '-' || b[j] == '+' || b[j] == '.' || b[j] == 'E') {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// edit sets one member of an object: replaced if present, else inserted
// by its rank.
type edit struct {
	rank int
	name string
	val  []byte
}

// splice appends to dst the object obj (whose members are ms) with edits,
// which are sorted by rank, applied.
func splice(dst, obj []byte, ms []member, edits []edit) []byte {
	dst = append(dst, '{')
	first := true
	put := func(b []byte) {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, b...)
	}
	putEdit := func(e *edit) {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, '"')
		dst = append(dst, e.name...)
		dst = append(dst, '"', ':')
		dst = append(dst, e.val...)
	}
	i := 0
	for _, m := range ms {
		replaced := false
		for ; i < len(edits) && edits[i].rank <= m.rank; i++ {
			putEdit(&edits[i])
			replaced = replaced || edits[i].rank == m.rank
		}
		if !replaced {
			put(obj[m.start:m.end])
		}
	}
	for ; i < len(edits); i++ {
		putEdit(&edits[i])
	}
	return append(dst, '}')
}

// appendJSONString appends s as encoding/json writes it.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := api.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// bindRaw returns the encoding of next, a binding of the pod whose
// encoding was raw: metadata.resourceVersion, metadata.generation and
// spec.nodeName are spliced in and the status encoded. It reports false if
// raw is not as expected.
func bindRaw(raw []byte, next *api.Pod) ([]byte, bool) {
	var topBuf, metaBuf, specBuf [24]member
	top, ok := members(topBuf[:0], raw, podOrder)
	if !ok {
		return nil, false
	}
	var meta, spec []byte
	for _, m := range top {
		switch m.rank {
		case rankMetadata:
			meta = raw[m.val:m.end]
		case rankSpec:
			spec = raw[m.val:m.end]
		}
	}
	mm, ok := members(metaBuf[:0], meta, metaOrder)
	if !ok {
		return nil, false
	}
	sm, ok := members(specBuf[:0], spec, specOrder)
	if !ok {
		return nil, false
	}
	status, err := api.Marshal(&next.Status)
	if err != nil {
		return nil, false
	}

	// The new metadata and spec are written to parts, then into place.
	parts := make([]byte, 0, len(meta)+len(spec)+2*len(next.ResourceVersion)+2*len(next.Spec.NodeName)+64)
	parts = appendJSONString(parts, next.ResourceVersion)
	rvEnd := len(parts)
	parts = strconv.AppendInt(parts, next.Generation, 10)
	genEnd := len(parts)
	parts = appendJSONString(parts, next.Spec.NodeName)
	nodeEnd := len(parts)
	parts = splice(parts, meta, mm, []edit{
		{rank: rankResourceVersion, name: "resourceVersion", val: parts[:rvEnd]},
		{rank: rankGeneration, name: "generation", val: parts[rvEnd:genEnd]},
	})
	metaEnd := len(parts)
	parts = splice(parts, spec, sm, []edit{{rank: rankNodeName, name: "nodeName", val: parts[genEnd:nodeEnd]}})

	out := make([]byte, 0, len(raw)+len(status)+len(parts)-len(meta)-len(spec))
	return splice(out, raw, top, []edit{
		{rank: rankMetadata, name: "metadata", val: parts[nodeEnd:metaEnd]},
		{rank: rankSpec, name: "spec", val: parts[metaEnd:]},
		{rank: rankStatus, name: "status", val: status},
	}), true
}
