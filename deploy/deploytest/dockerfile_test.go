package deploytest

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, its continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, ...
	args string
	line int
}

// stage is one FROM and the instructions under it.
type stage struct {
	from, name string
	body       []instruction
}

func (s stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.body {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// dockerfile is the repository's Dockerfile, parsed: the ARGs before the
// first FROM, and the stages.
type dockerfile struct {
	globalArgs map[string]string
	stages     []stage
}

// parseDockerfile reads the instructions of the Dockerfile at path. It
// knows what this Dockerfile uses (comments, continuation lines, ${ARG}
// in FROM), not the whole syntax.
func parseDockerfile(t *testing.T, path string) dockerfile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ins []instruction
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n, pending, start := 0, "", 0; sc.Scan(); {
		n++
		line := strings.TrimSpace(sc.Text())
		if pending == "" && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if pending == "" {
			start = n
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			pending += cont + " "
			continue
		}
		line = pending + line
		pending = ""
		cmd, args, _ := strings.Cut(line, " ")
		ins = append(ins, instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start})
	}
	df := dockerfile{globalArgs: map[string]string{}}
	for _, in := range ins {
		switch {
		case in.cmd == "FROM":
			from, name, _ := strings.Cut(in.args, " AS ")
			from = os.Expand(strings.TrimSpace(from), func(k string) string { return df.globalArgs[k] })
			df.stages = append(df.stages, stage{from: from, name: strings.TrimSpace(name)})
		case len(df.stages) == 0 && in.cmd == "ARG":
			k, v, _ := strings.Cut(in.args, "=")
			df.globalArgs[k] = v
		case len(df.stages) == 0:
			t.Fatalf("Dockerfile:%d: %s before the first FROM", in.line, in.cmd)
		default:
			s := &df.stages[len(df.stages)-1]
			s.body = append(s.body, in)
		}
	}
	if len(df.stages) < 2 {
		t.Fatalf("Dockerfile: %d stages, want a build stage and a final one", len(df.stages))
	}
	return df
}

// execForm decodes an instruction in exec (JSON) form, as ENTRYPOINT and
// CMD must be on an image without a shell.
func execForm(t *testing.T, in instruction) []string {
	t.Helper()
	var v []string
	if err := json.Unmarshal([]byte(in.args), &v); err != nil {
		t.Fatalf("Dockerfile:%d: %s %s is not in exec form [\"...\"]: %v", in.line, in.cmd, in.args, err)
	}
	return v
}

// goDirective is the go line of Spillway's go.mod.
func goDirective(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go ([0-9.]+)\s*$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	return string(m[1])
}

// image is what the Dockerfile promises about the image it makes.
type image struct {
	user       string   // USER
	expose     []string // EXPOSE, one entry per port
	entrypoint []string
	cmd        []string
}

// checkDockerfile checks the Dockerfile's shape and returns what the
// Kubernetes manifests must agree with.
func checkDockerfile(t *testing.T) image {
	t.Helper()
	df := parseDockerfile(t, filepath.Join(repoRoot, "Dockerfile"))
	build, final := df.stages[0], df.stages[len(df.stages)-1]

	// The builder's Go is go.mod's: an older one would fetch a toolchain
	// during the build, a newer one might build what CI never tested.
	if want := "golang:" + goDirective(t) + "-"; !strings.HasPrefix(build.from, want) {
		t.Errorf("build stage FROM %s, want %s... (go.mod's go line)", build.from, want)
	}
	// The build stage runs the build command of scripts/build-static.sh,
	// the one TestReleaseBinaryIsStatic runs, and the final stage copies
	// what it wrote.
	var out string
	for _, run := range build.all("RUN") {
		f := strings.Fields(run.args)
		if f[0] == "./scripts/build-static.sh" && len(f) >= 2 {
			out = f[1]
		}
		if strings.Contains(run.args, "go build") {
			t.Errorf("Dockerfile:%d: RUN %s: build with ./scripts/build-static.sh, the command deploy/deploytest checks", run.line, run.args)
		}
	}
	if out == "" {
		t.Fatalf("build stage %q has no RUN ./scripts/build-static.sh OUT", build.name)
	}

	// distroless static: CA certificates and /tmp, no libc, no shell.
	if !regexp.MustCompile(`^gcr\.io/distroless/static-debian[0-9]+:nonroot$`).MatchString(final.from) && final.from != "scratch" {
		t.Errorf("final stage FROM %s, want gcr.io/distroless/static-debianNN:nonroot or scratch", final.from)
	}
	var img image
	var installed string
	for _, cp := range final.all("COPY") {
		f := strings.Fields(cp.args)
		if len(f) == 3 && f[0] == "--from="+build.name && f[1] == out {
			installed = f[2]
		}
	}
	if installed == "" {
		t.Errorf("final stage does not COPY --from=%s %s", build.name, out)
	}
	if u := final.all("USER"); len(u) != 1 {
		t.Errorf("final stage has %d USER instructions, want 1", len(u))
	} else {
		img.user = u[0].args
	}
	if img.user != "65532:65532" {
		t.Errorf("USER %s, want 65532:65532 (distroless's nonroot, and runAsUser in the StatefulSet)", img.user)
	}
	for _, e := range final.all("EXPOSE") {
		img.expose = append(img.expose, strings.Fields(e.args)...)
	}
	if e := final.all("ENTRYPOINT"); len(e) == 1 {
		img.entrypoint = execForm(t, e[0])
	}
	if len(img.entrypoint) != 1 || img.entrypoint[0] != installed {
		t.Errorf("ENTRYPOINT %q, want [%q], the binary the final stage copies", img.entrypoint, installed)
	}
	if c := final.all("CMD"); len(c) == 1 {
		img.cmd = execForm(t, c[0])
	}
	return img
}

func TestDockerfile(t *testing.T) {
	img := checkDockerfile(t)
	// The admin endpoint alone: the port is compared with admin.listen in
	// TestManifestsAgreeWithConfig.
	if len(img.expose) != 1 {
		t.Errorf("EXPOSE %q, want the admin port alone", img.expose)
	}
}

// TestReleaseBinaryIsStatic checks what the Dockerfile's build command
// (scripts/build-static.sh, built once by TestMain) makes: a binary that
// runs on an image with no libc, with no build paths in it, that knows its
// version.
func TestReleaseBinaryIsStatic(t *testing.T) {
	bin := releaseBinary(t)

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		switch p.Type {
		case elf.PT_INTERP:
			t.Error("the binary has an ELF interpreter (PT_INTERP): it is dynamically linked")
		case elf.PT_DYNAMIC:
			t.Error("the binary has a dynamic section (PT_DYNAMIC): it is dynamically linked")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %q (%v)", libs, err)
	}

	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	for k, want := range map[string]string{"CGO_ENABLED": "0", "-trimpath": "true"} {
		if settings[k] != want {
			t.Errorf("build setting %s = %q, want %q", k, settings[k], want)
		}
	}

	// -trimpath: the machine's paths stay out of the image.
	abs, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(abs)) {
		t.Errorf("the binary contains the build path %s", abs)
	}

	// -trimpath leaves -ldflags out of the build info: the version shows
	// that -X reached the binary.
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || string(out) != "spillway "+testVersion+"\n" {
		t.Errorf("spillway version: %q (%v), want %q", out, err, "spillway "+testVersion+"\n")
	}
}
