//go:build !linux

package fleet

import "syscall"

// workerProcAttr: only Linux can tie a child's life to its parent's.
func workerProcAttr() *syscall.SysProcAttr { return nil }
