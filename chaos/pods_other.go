//go:build !linux

package chaos

import (
	"os/exec"
	"syscall"
)

// setPodAttrs puts a pod in its own process group, so a Ctrl-C at the
// terminal reaches the suite, which stops the pods itself.
func setPodAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
