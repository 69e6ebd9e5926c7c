//go:build !linux

package fleet

import (
	"fmt"
	"syscall"
)

// workerProcAttr: only Linux can tie a child's life to its parent's.
func workerProcAttr() *syscall.SysProcAttr { return nil }

// processStopped: only Linux is asked (/proc); elsewhere no process is
// taken for stopped.
func processStopped(pid int) (bool, error) { return false, nil }

// processState: only Linux has /proc to read it from.
func processState(pid int) (byte, error) {
	return 0, fmt.Errorf("process %d: no /proc to read its state from", pid)
}
