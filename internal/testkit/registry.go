package testkit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// Registry is a schema registry (franz-go's srfake, served by the fakesr
// command) running as a separate process on 127.0.0.1. Stop and Start stop
// it and start it again on the same port with the same schemas, which is
// how tests make the registry unreachable and then back.
type Registry struct {
	t          testing.TB
	bin, seed  string
	port       int
	user, pass string
	cmd        *exec.Cmd
	waited     chan struct{}
}

// StartRegistry builds fakesr and starts it with schemas registered, each
// under its given id. user and pass, when set, are required as basic auth.
// The process is stopped when the test ends.
func StartRegistry(t testing.TB, schemas []sr.SubjectSchema, user, pass string) *Registry {
	t.Helper()
	dir := t.TempDir()
	r := &Registry{t: t, bin: filepath.Join(dir, "fakesr"), seed: filepath.Join(dir, "seed.json"), user: user, pass: pass}
	if err := GoBuild(r.bin, "github.com/spillway/spillway/internal/testkit/fakesr", false); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(schemas)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.seed, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r.Start()
	t.Cleanup(r.Stop)
	return r
}

// URL is the registry's base URL.
func (r *Registry) URL() string { return "http://127.0.0.1:" + strconv.Itoa(r.port) }

// Start starts the process (again, on the same port once it has one) and
// returns once it listens.
func (r *Registry) Start() {
	r.t.Helper()
	if r.cmd != nil {
		r.t.Fatal("fakesr is running already")
	}
	args := []string{"-port", strconv.Itoa(r.port), "-seed", r.seed}
	if r.user != "" {
		args = append(args, "-user", r.user, "-password", r.pass)
	}
	// A restart may find the port in TIME_WAIT or not yet released: try
	// for a while, as a restarted real registry would.
	deadline := time.Now().Add(time.Minute)
	for {
		err := r.start(args)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("starting fakesr: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (r *Registry) start(args []string) error {
	cmd := exec.Command(r.bin, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Wait()
		return fmt.Errorf("fakesr exited before it listened: %w", err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "LISTEN ")
	if !ok {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("fakesr printed %q, want LISTEN host:port", line)
	}
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	r.port, _ = strconv.Atoi(p)
	r.cmd = cmd
	r.waited = make(chan struct{})
	go func() { _ = cmd.Wait(); close(r.waited) }()
	return nil
}

// Stop stops the process, if it runs, and waits for it to exit.
func (r *Registry) Stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(os.Interrupt)
	select {
	case <-r.waited:
	case <-time.After(time.Minute):
		_ = r.cmd.Process.Kill()
		<-r.waited
	}
	r.cmd = nil
}
