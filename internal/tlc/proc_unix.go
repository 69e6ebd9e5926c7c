//go:build unix

package tlc

import (
	"os/exec"
	"syscall"
)

// killGroup makes cmd's cancellation kill the JVM's whole process group:
// the JVM runs in a group of its own, and a cancelled or timed-out run
// sends SIGKILL to that group, so no TLC worker outlives its run.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
