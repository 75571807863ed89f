package api

import (
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// TypeMeta names an object's kind and API version.
type TypeMeta struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
}

// ObjectMeta is the metadata every stored object carries.
type ObjectMeta struct {
	Name              string `json:"name,omitempty"`
	GenerateName      string `json:"generateName,omitempty"`
	Namespace         string `json:"namespace,omitempty"`
	UID               string `json:"uid,omitempty"`
	ResourceVersion   string `json:"resourceVersion,omitempty"`
	Generation        int64  `json:"generation,omitempty"`
	CreationTimestamp *Time  `json:"creationTimestamp,omitempty"`
	DeletionTimestamp *Time  `json:"deletionTimestamp,omitempty"`
	// DeletionGracePeriodSeconds is how long a pod being deleted was
	// given to stop; with DeletionTimestamp it is set by a graceful
	// delete and never by a client.
	DeletionGracePeriodSeconds *int64            `json:"deletionGracePeriodSeconds,omitempty"`
	Labels                     map[string]string `json:"labels,omitempty"`
	Annotations                map[string]string `json:"annotations,omitempty"`
	OwnerReferences            []OwnerReference  `json:"ownerReferences,omitempty"`
	Finalizers                 []string          `json:"finalizers,omitempty"`
}

// OwnerReference points from a dependent object to the object that owns it.
type OwnerReference struct {
	APIVersion         string `json:"apiVersion"`
	Kind               string `json:"kind"`
	Name               string `json:"name"`
	UID                string `json:"uid"`
	Controller         *bool  `json:"controller,omitempty"`
	BlockOwnerDeletion *bool  `json:"blockOwnerDeletion,omitempty"`
}

// ListMeta is the metadata of a list: the resourceVersion the list was read at.
type ListMeta struct {
	ResourceVersion string `json:"resourceVersion,omitempty"`
	Continue        string `json:"continue,omitempty"`
}

// Time is a timestamp that encodes as RFC 3339 in UTC with second precision,
// as Kubernetes' metav1.Time does.
type Time struct {
	time.Time
}

// NewTime wraps t, dropping sub-second precision and the monotonic reading.
func NewTime(t time.Time) *Time {
	return &Time{t.UTC().Truncate(time.Second)}
}

// MarshalJSON encodes the time as an RFC 3339 string, or null when zero.
func (t Time) MarshalJSON() ([]byte, error) {
	return t.appendJSON(make([]byte, 0, len(time.RFC3339)+2)), nil
}

// appendJSON appends what MarshalJSON writes; the generated encoder
// (encode.go) calls it too.
func (t Time) appendJSON(b []byte) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339)
	return append(b, '"')
}

// MarshalJSONTo writes what MarshalJSON does, in the encoder's own
// buffer: the store encodes stored objects again on reads (each pod has a
// dozen times), and this spares an allocation and a second parse each.
func (t Time) MarshalJSONTo(enc *jsontext.Encoder) error {
	if t.IsZero() {
		return enc.WriteToken(jsontext.Null)
	}
	return enc.WriteValue(t.appendJSON(enc.AvailableBuffer()))
}

// UnmarshalJSON accepts RFC 3339 strings and null.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		t.Time = time.Time{}
		return nil
	}
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return &time.ParseError{Layout: time.RFC3339, Value: string(b), Message: ": not a string"}
	}
	pt, err := time.Parse(time.RFC3339, string(b[1:len(b)-1]))
	if err != nil {
		return err
	}
	// Keep only what MarshalJSON can write back, so that a decoded object
	// encodes to the same value: whole seconds, years 0 to 9999 in UTC.
	pt = pt.UTC().Truncate(time.Second)
	if y := pt.Year(); y < 0 || y > 9999 {
		return &time.ParseError{Layout: time.RFC3339, Value: string(b), Message: ": year outside 0-9999 in UTC"}
	}
	t.Time = pt
	return nil
}

// Object is implemented by every stored kind.
type Object interface {
	GetObjectMeta() *ObjectMeta
	GetTypeMeta() *TypeMeta
}

// GetObjectMeta returns the object's metadata for in-place changes.
func (m *ObjectMeta) GetObjectMeta() *ObjectMeta { return m }

// GetTypeMeta returns the object's type metadata for in-place changes.
func (t *TypeMeta) GetTypeMeta() *TypeMeta { return t }

// ControllerRef returns m's ownerReference with controller=true, or nil.
func ControllerRef(m *ObjectMeta) *OwnerReference {
	for i := range m.OwnerReferences {
		if c := m.OwnerReferences[i].Controller; c != nil && *c {
			return &m.OwnerReferences[i]
		}
	}
	return nil
}
