//go:build !linux

package fleet

import "syscall"

// workerProcAttr: only Linux can tie a child's life to its parent's.
func workerProcAttr() *syscall.SysProcAttr { return nil }

// processStopped: only Linux is asked (/proc); elsewhere no process is
// taken for stopped.
func processStopped(pid int) (bool, error) { return false, nil }
