package fleet

import "syscall"

// workerProcAttr makes a worker die with the fleet: a fleet killed by
// SIGKILL, which no handler sees, leaves no worker behind.
func workerProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
