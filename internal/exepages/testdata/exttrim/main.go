// Command exttrim trims its own pages while linked by the system linker
// with libc (RELRO), then starts threads and calls C: what a dropped
// relocated page would break. TestTrimExternallyLinked runs it.
package main

/*
#include <stdio.h>
#include <stdlib.h>
static int twice(int x) { return 2 * x; }
// stderr is a libc variable: C code reaches it through the relocated
// global offset table, which RELRO makes read-only after loading.
static void *err_file(void) { return stderr; }
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"github.com/outpost-edge/outpost/internal/exepages"
)

func main() {
	before := C.err_file()
	res, err := exepages.Trim()
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	var wg sync.WaitGroup
	sum := make([]C.int, 8)
	for i := range sum {
		// A goroutine that ends locked ends its thread: the runtime
		// starts new ones, through pthread_create.
		wg.Go(func() {
			runtime.LockOSThread()
			sum[i] = C.twice(C.int(i))
		})
	}
	wg.Wait()
	p := C.malloc(64)
	C.free(unsafe.Pointer(p))
	if after := C.err_file(); after != before {
		fmt.Printf("stderr moved from %p to %p: a relocated page was dropped\n", before, after)
		os.Exit(1)
	}
	fmt.Println("ok", res.Mappings, sum[7])
}
