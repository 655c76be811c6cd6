//go:build !unix

package azuritetest

import "os/exec"

func setProcessGroup(cmd *exec.Cmd) {}

// signalGroup kills the process itself: without process groups there is no gentler way.
func signalGroup(cmd *exec.Cmd, kill bool) { cmd.Process.Kill() }
