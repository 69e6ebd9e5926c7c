package fleet

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// workerProcAttr makes a worker die with the fleet: a fleet killed by
// SIGKILL, which no handler sees, leaves no worker behind.
func workerProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// processStopped reports whether process pid is stopped (SIGSTOP, state T
// in /proc/PID/stat).
func processStopped(pid int) (bool, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false, err
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	if !ok || rest == "" {
		return false, fmt.Errorf("/proc/%d/stat: no state in %q", pid, b)
	}
	return rest[0] == 'T', nil
}
