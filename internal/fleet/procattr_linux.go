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
	st, err := processState(pid)
	return st == 'T', err
}

// processState is the state letter of process pid in /proc/PID/stat (T:
// stopped).
func processState(pid int) (byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	if !ok || rest == "" {
		return 0, fmt.Errorf("/proc/%d/stat: no state in %q", pid, b)
	}
	return rest[0], nil
}
