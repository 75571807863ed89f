//go:build outpost_plant

package plant

import (
	"os"
	"strings"
	"sync"
)

var planted = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	for _, name := range strings.Split(os.Getenv("OUTPOST_PLANT"), ",") {
		if name = strings.TrimSpace(name); name != "" {
			m[name] = true
		}
	}
	return m
})

// On reports whether the named bug is planted: listed in OUTPOST_PLANT
// (comma-separated).
func On(name string) bool { return planted()[name] }
