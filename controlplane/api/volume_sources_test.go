package api

import (
	"strings"
	"testing"
)

// A volume whose only source is one outpost does not support is accepted by
// the decoder with a warning, then refused by validation naming that
// source, not as if the volume had none.
func TestUnsupportedVolumeSource(t *testing.T) {
	const container = `"containers":[{"name":"a","image":"b"}]`
	tests := []struct {
		name string
		doc  string
		want string // "" = valid
	}{
		{"pod with a configMap volume",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default"},"spec":{` + container + `,"volumes":[{"name":"ok","emptyDir":{}},{"name":"c","configMap":{"name":"cm"}}]}}`,
			`spec.volumes[1]: Unsupported value: "configMap": outpost supports hostPath, emptyDir and persistentVolumeClaim volumes`},
		{"pod with an nfs volume",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default"},"spec":{` + container + `,"volumes":[{"name":"n","nfs":{"server":"x","path":"/"}}]}}`,
			`spec.volumes[0]: Unsupported value: "nfs": outpost supports hostPath, emptyDir and persistentVolumeClaim volumes`},
		{"deployment template with a secret volume",
			`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"default"},"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{` + container + `,"volumes":[{"name":"s","secret":{"secretName":"x"}}]}}}}`,
			`spec.template.spec.volumes[0]: Unsupported value: "secret": outpost supports hostPath, emptyDir and persistentVolumeClaim volumes`},
		{"a volume with no source at all",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default"},"spec":{` + container + `,"volumes":[{"name":"e"}]}}`,
			`spec.volumes[0]: Required value: must specify a volume type`},
		{"an unsupported source next to a supported one is dropped",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default"},"spec":{` + container + `,"volumes":[{"name":"e","emptyDir":{},"configMap":{"name":"cm"}}]}}`,
			``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj, _, err := Decode([]byte(tt.doc))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			SetDefaults(obj)
			errs := Validate(obj)
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if tt.want == "" {
				if len(got) > 0 {
					t.Fatalf("refused: %v", got)
				}
				return
			}
			if len(got) != 1 || !strings.HasPrefix(got[0], tt.want) {
				t.Fatalf("errors %q\nwant exactly one starting %q", got, tt.want)
			}
		})
	}
}
