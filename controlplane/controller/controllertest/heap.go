package controllertest

import "runtime"

// LiveHeapMiB is the live heap after a forced collection, in MiB: a
// memory benchmark reads it before and after starting the part it
// measures (once that part has synced) and reports the difference.
func LiveHeapMiB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc) / (1 << 20)
}
