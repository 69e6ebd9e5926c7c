//go:build !unix

package tlc

import "os/exec"

// killGroup leaves cmd as it is: exec.CommandContext kills the JVM itself
// on cancellation.
func killGroup(cmd *exec.Cmd) {}
