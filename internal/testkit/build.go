package testkit

import (
	"fmt"
	"os/exec"
	"strings"
)

// GoBuild runs `go build -o out [-race] pkg`, pkg being an import path or a
// directory relative to the current one. The error holds the build's output.
func GoBuild(out, pkg string, race bool) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go command is needed to build %s: %w", pkg, err)
	}
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race")
	}
	args = append(args, pkg)
	if msg, err := exec.Command(goBin, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	return nil
}
