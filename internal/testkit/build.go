package testkit

import (
	"fmt"
	"os/exec"
	"path/filepath"
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

// GoBuildInto builds the main packages pkgs, without -race, into dir in one
// go build (which compiles their shared packages once and links them side by
// side); each binary is named after the last element of its package path.
func GoBuildInto(dir string, pkgs ...string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go command is needed to build %s: %w", strings.Join(pkgs, ", "), err)
	}
	args := append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)
	if msg, err := exec.Command(goBin, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	return nil
}
