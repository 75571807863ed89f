// Package portcheck tells, before a command starts its listeners, which
// of the addresses it needs another process already holds, and which
// process that is: a busy port is then one clear line naming the flag
// that moves it, instead of a listener failing deep inside a component
// while the rest waits for it.
package portcheck
