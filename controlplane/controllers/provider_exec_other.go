//go:build !unix

package controllers

import "os/exec"

// killGroup leaves cmd as it is: process groups are Unix's.
func killGroup(*exec.Cmd) {}
