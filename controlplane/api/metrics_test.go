package api

import (
	"testing"
	"time"
)

// The metrics objects encode as metrics-server's do: cpu in nanocores,
// memory in Ki when whole, the window as a Go duration; and decode back.
func TestMetricsEncoding(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	m := NodeMetrics{
		TypeMeta:   TypeMeta{Kind: "NodeMetrics", APIVersion: MetricsAPIVersion},
		ObjectMeta: ObjectMeta{Name: "edge-1", CreationTimestamp: NewTime(at)},
		Timestamp:  Time{at},
		Window:     Duration{10500 * time.Millisecond},
		Usage:      ResourceList{ResourceCPU: NanoCPU(163470667), ResourceMemory: BinaryBytes(1588180 << 10)},
	}
	b, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"apiVersion":"metrics.k8s.io/v1beta1","kind":"NodeMetrics","metadata":{"name":"edge-1","creationTimestamp":"2026-03-01T12:00:00Z"},` +
		`"timestamp":"2026-03-01T12:00:00Z","window":"10.5s","usage":{"cpu":"163470667n","memory":"1588180Ki"}}`
	if string(b) != want {
		t.Errorf("encoded\n%s\nwant\n%s", b, want)
	}
	var back NodeMetrics
	if err := Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Window.Duration != 10500*time.Millisecond || back.Usage[ResourceCPU].MilliValue() != 164 || back.Usage[ResourceMemory].Value() != 1588180<<10 {
		t.Errorf("decoded %+v", back)
	}
	if q := NanoCPU(5); q.MilliValue() != 1 || q.String() != "5n" {
		t.Errorf("NanoCPU(5) = %s, %dm; want 5n rounded up to 1m", q, q.MilliValue())
	}
	if q := BinaryBytes(1000); q.String() != "1000" || q.Value() != 1000 {
		t.Errorf("BinaryBytes(1000) = %s", q)
	}
	if err := Unmarshal([]byte(`"ten seconds"`), &back.Window); err == nil {
		t.Error("a window that is no duration was accepted")
	}
}
