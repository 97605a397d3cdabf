package chaos

import (
	"os/exec"
	"syscall"
)

// setPodAttrs puts a pod in its own process group (a Ctrl-C at the
// terminal reaches the suite, which stops the pods itself) and has the
// kernel kill it if the suite dies first.
func setPodAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
