//go:build !outpost_plant

package plant

// Enabled reports whether this binary can plant bugs at all.
const Enabled = false

// On reports whether the named bug is planted; never, in this build.
func On(string) bool { return false }
