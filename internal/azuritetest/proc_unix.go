//go:build unix

package azuritetest

import (
	"os/exec"
	"syscall"
)

// setProcessGroup puts Azurite into a process group of its own, so stopping it also
// stops any helper processes node may have started.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends SIGTERM (graceful shutdown) or SIGKILL to the process group.
func signalGroup(cmd *exec.Cmd, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	syscall.Kill(-cmd.Process.Pid, sig)
}
