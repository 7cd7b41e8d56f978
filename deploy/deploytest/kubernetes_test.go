package deploytest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// manifestsDir holds the kustomization the tests build.
var manifestsDir = filepath.Join(repoRoot, "deploy", "kubernetes")

// shutdownMargin is how much longer than shutdown.timeout the kubelet must
// wait before its SIGKILL: past the timeout Spillway still logs what it
// could not finish and exits.
const shutdownMargin = 10 * time.Second

// strictDecoder decodes manifests into the Kubernetes API types, refusing
// unknown and duplicate fields, as `kubectl apply --validate=strict` does.
func strictDecoder(t *testing.T) runtime.Decoder {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme, networkingv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}

// objects is what the kustomization renders, decoded.
type objects struct {
	sts     *appsv1.StatefulSet
	cm      *corev1.ConfigMap
	secret  *corev1.Secret
	svc     *corev1.Service
	pdb     *policyv1.PodDisruptionBudget
	account *corev1.ServiceAccount
	netpol  *networkingv1.NetworkPolicy
}

// build renders deploy/kubernetes as `kubectl apply -k` would, and decodes
// every object strictly.
func build(t *testing.T) objects {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), manifestsDir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", manifestsDir, err)
	}
	dec := strictDecoder(t)
	var o objects
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		obj, gvk, err := dec.Decode(y, nil, nil)
		if err != nil {
			t.Fatalf("%s/%s: %v", r.GetKind(), r.GetName(), err)
		}
		dup := func(set bool) {
			if set {
				t.Fatalf("two objects of kind %s", gvk.Kind)
			}
		}
		switch v := obj.(type) {
		case *appsv1.StatefulSet:
			dup(o.sts != nil)
			o.sts = v
		case *corev1.ConfigMap:
			dup(o.cm != nil)
			o.cm = v
		case *corev1.Secret:
			dup(o.secret != nil)
			o.secret = v
		case *corev1.Service:
			dup(o.svc != nil)
			o.svc = v
		case *policyv1.PodDisruptionBudget:
			dup(o.pdb != nil)
			o.pdb = v
		case *corev1.ServiceAccount:
			dup(o.account != nil)
			o.account = v
		case *networkingv1.NetworkPolicy:
			dup(o.netpol != nil)
			o.netpol = v
		default:
			t.Fatalf("%s: a kind this test does not check; add it here", gvk)
		}
	}
	if o.sts == nil || o.cm == nil || o.secret == nil || o.svc == nil || o.pdb == nil || o.account == nil || o.netpol == nil {
		t.Fatalf("kustomize build lacks an object: %+v", o)
	}
	return o
}

// TestManifestFilesDecodeStrictly decodes each file on its own, as written:
// the rendered objects went through kustomize's YAML, which would hide a
// key given twice in a file. It also checks that every file is used.
func TestManifestFilesDecodeStrictly(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(manifestsDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k types.Kustomization
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	used := map[string]bool{"kustomization.yaml": true}
	for _, r := range k.Resources {
		used[r] = true
	}
	for _, g := range k.ConfigMapGenerator {
		for _, f := range g.FileSources {
			used[f] = true
		}
	}

	dec := strictDecoder(t)
	files, err := filepath.Glob(filepath.Join(manifestsDir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		if !used[name] {
			t.Errorf("%s is not in kustomization.yaml: kubectl apply -k leaves it out", name)
		}
		if !slices.Contains(k.Resources, name) {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte("\n---")) {
			t.Errorf("%s: one object per file", name)
		}
		if _, _, err := dec.Decode(data, nil, nil); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// effective is the part of `spillway config check`'s output (the effective
// config) that the pods depend on.
type effective struct {
	Kafka struct {
		Topics     []string `json:"topics"`
		InstanceID string   `json:"instance_id"`
		SASL       struct {
			Mechanism string `json:"mechanism"`
			Password  string `json:"password"`
		} `json:"sasl"`
	} `json:"kafka"`
	Backpressure struct {
		MemoryLimit string `json:"memory_limit"`
	} `json:"backpressure"`
	Admin struct {
		Listen string `json:"listen"`
	} `json:"admin"`
	Shutdown struct {
		Timeout string `json:"timeout"`
	} `json:"shutdown"`
}

// configCheck runs the release binary's `config check` on the config file
// with exactly the environment env, and returns the effective config and
// what it printed to stderr (warnings).
func configCheck(t *testing.T, file string, env []string) (effective, string) {
	t.Helper()
	cmd := exec.Command(releaseBinary(t), "config", "check", file)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("spillway config check with the pod's config and environment: %v\n%s", err, stderr.String())
	}
	var e effective
	if err := yaml.Unmarshal(stdout.Bytes(), &e); err != nil {
		t.Fatalf("config check output: %v\n%s", err, stdout.String())
	}
	return e, stderr.String()
}

// podEnv is the environment Kubernetes gives the container in the pod
// named pod, with the Secret's values.
func podEnv(t *testing.T, c corev1.Container, pod string, secret *corev1.Secret) []string {
	t.Helper()
	if len(c.EnvFrom) > 0 {
		t.Fatal("envFrom: this test resolves env entries one by one; extend podEnv")
	}
	var env []string
	for _, e := range c.Env {
		switch from := e.ValueFrom; {
		case from == nil:
			env = append(env, e.Name+"="+e.Value)
		case from.FieldRef != nil && from.FieldRef.FieldPath == "metadata.name":
			env = append(env, e.Name+"="+pod)
		case from.SecretKeyRef != nil:
			ref := from.SecretKeyRef
			if ref.Name != secret.Name {
				t.Fatalf("env %s: from Secret %q, but the manifests define %q", e.Name, ref.Name, secret.Name)
			}
			v, ok := secret.StringData[ref.Key]
			if !ok {
				var b []byte
				b, ok = secret.Data[ref.Key]
				v = string(b)
			}
			switch {
			case ok:
				env = append(env, e.Name+"="+v)
			case ref.Optional == nil || !*ref.Optional:
				t.Errorf("env %s: key %s is not in Secret %s, and not optional: the pod would not start", e.Name, ref.Key, secret.Name)
			}
		default:
			t.Fatalf("env %s: a source this test does not resolve; extend podEnv", e.Name)
		}
	}
	return env
}

// storageVariables are the variables besides SPILLWAY_* that Spillway (or
// the cloud SDK it calls) reads for credentials: the README's "Storage
// backends" table documents each.
var storageVariables = []string{
	"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
	"AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN",
}

// podSetup returns what the StatefulSet's last pod runs: its container,
// the config file its --config names (from the ConfigMap, written to a
// temporary directory), the pod's name and its environment.
func podSetup(t *testing.T, o objects) (c corev1.Container, file, pod string, env []string) {
	t.Helper()
	sts := o.sts
	spec := sts.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c = spec.Containers[0]

	// The config file: where --config points, inside the ConfigMap's mount.
	i := slices.Index(c.Args, "--config")
	if i < 0 || i+1 >= len(c.Args) || c.Args[0] != "run" {
		t.Fatalf("args %q, want run --config FILE", c.Args)
	}
	configPath := c.Args[i+1]
	var mount *corev1.VolumeMount
	for j, m := range c.VolumeMounts {
		if m.MountPath == path.Dir(configPath) {
			mount = &c.VolumeMounts[j]
		}
	}
	if mount == nil {
		t.Fatalf("--config %s: no volume is mounted at %s", configPath, path.Dir(configPath))
	}
	var vol *corev1.Volume
	for j, v := range spec.Volumes {
		if v.Name == mount.Name {
			vol = &spec.Volumes[j]
		}
	}
	if vol == nil || vol.ConfigMap == nil || vol.ConfigMap.Name != o.cm.Name || len(vol.ConfigMap.Items) > 0 {
		t.Fatalf("the volume at %s is not the ConfigMap %s (all keys as files)", mount.MountPath, o.cm.Name)
	}
	yamlText, ok := o.cm.Data[path.Base(configPath)]
	if !ok {
		t.Fatalf("ConfigMap %s has no key %s for --config %s", o.cm.Name, path.Base(configPath), configPath)
	}
	file = filepath.Join(t.TempDir(), path.Base(configPath))
	if err := os.WriteFile(file, []byte(yamlText), 0o600); err != nil {
		t.Fatal(err)
	}

	if sts.Spec.Replicas == nil || *sts.Spec.Replicas < 1 {
		t.Fatal("replicas unset")
	}
	pod = fmt.Sprintf("%s-%d", sts.Name, *sts.Spec.Replicas-1)
	env = podEnv(t, c, pod, o.secret)
	return c, file, pod, env
}

// TestManifestsAgreeWithConfig checks the StatefulSet against the config
// its pods run with: `spillway config check` (the release binary) loads the
// ConfigMap's file with the environment of the StatefulSet's last pod.
func TestManifestsAgreeWithConfig(t *testing.T) {
	o := build(t)
	sts := o.sts
	spec := sts.Spec.Template.Spec
	c, file, pod, env := podSetup(t, o)
	cfg, warnings := configCheck(t, file, env)

	// kafka.instance_id: the pod's name, from the API, not written in.
	if cfg.Kafka.InstanceID != pod {
		t.Errorf("kafka.instance_id is %q in pod %s, want the pod's name", cfg.Kafka.InstanceID, pod)
	}
	for _, e := range c.Env {
		if e.Name == "SPILLWAY_KAFKA_INSTANCE_ID" && (e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name") {
			t.Errorf("SPILLWAY_KAFKA_INSTANCE_ID is not from fieldRef metadata.name: %+v", e)
		}
	}
	if cfg.Kafka.SASL.Mechanism != "" && cfg.Kafka.SASL.Password == "" {
		t.Error("kafka.sasl is on, and no password reaches the pod")
	}

	// A graceful stop ends before the kubelet's SIGKILL.
	timeout, err := time.ParseDuration(cfg.Shutdown.Timeout)
	if err != nil {
		t.Fatalf("shutdown.timeout %q: %v", cfg.Shutdown.Timeout, err)
	}
	if spec.TerminationGracePeriodSeconds == nil {
		t.Fatal("terminationGracePeriodSeconds unset")
	}
	if grace := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second; grace < timeout+shutdownMargin {
		t.Errorf("terminationGracePeriodSeconds %v, want at least shutdown.timeout %v + %v", grace, timeout, shutdownMargin)
	}

	// The probes reach the admin endpoint: it listens beyond loopback, on
	// the port they name.
	host, port, err := net.SplitHostPort(cfg.Admin.Listen)
	if err != nil {
		t.Fatalf("admin.listen %q: %v", cfg.Admin.Listen, err)
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		t.Errorf("admin.listen %q: the kubelet probes the pod's IP; listen on all interfaces (:%s)", cfg.Admin.Listen, port)
	}
	for _, p := range []struct {
		what  string
		probe *corev1.Probe
		path  string
	}{{"readinessProbe", c.ReadinessProbe, "/readyz"}, {"livenessProbe", c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: want an httpGet probe on %s", p.what, p.path)
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.path || (g.Scheme != "" && g.Scheme != corev1.URISchemeHTTP) {
			t.Errorf("%s: %s %s, want HTTP %s", p.what, g.Scheme, g.Path, p.path)
		}
		if got := containerPort(t, c, g.Port); strconv.Itoa(int(got)) != port {
			t.Errorf("%s: port %s is %d, want admin.listen's %s", p.what, g.Port.String(), got, port)
		}
	}
	img := checkDockerfile(t)
	if !slices.Equal(img.expose, []string{port}) && !slices.Equal(img.expose, []string{port + "/tcp"}) {
		t.Errorf("Dockerfile EXPOSE %q, want admin.listen's port %s", img.expose, port)
	}
	if len(c.Command) > 0 || (img.cmd != nil && !slices.Equal(img.cmd, c.Args)) {
		t.Errorf("container command %q args %q; the image runs %q %q: keep them the same", c.Command, c.Args, img.entrypoint, img.cmd)
	}

	// memory_limit: auto reads the cgroup limit, which is limits.memory.
	// The config's storage settings must fit in it: config check warns
	// when they would not, given that limit.
	limit, ok := c.Resources.Limits[corev1.ResourceMemory]
	if !ok {
		t.Fatal("resources.limits.memory unset: memory_limit auto would find no cgroup limit and take 1GiB, whatever the node has")
	}
	if req, ok := c.Resources.Requests[corev1.ResourceMemory]; !ok || req.Cmp(limit) != 0 {
		t.Errorf("requests.memory %v, want limits.memory %v: Spillway uses up to its limit", req.String(), limit.String())
	}
	switch ml := cfg.Backpressure.MemoryLimit; ml {
	case "auto":
		_, w := configCheck(t, file, append(slices.Clone(env), "SPILLWAY_BACKPRESSURE_MEMORY_LIMIT="+strconv.FormatInt(limit.Value(), 10)))
		if w != "" {
			t.Errorf("with memory_limit auto, the pod's limit %s does not fit the config:\n%s", limit.String(), w)
		}
	default:
		n, err := parseSize(ml)
		if err != nil {
			t.Fatalf("backpressure.memory_limit %q: %v", ml, err)
		}
		if n > limit.Value() {
			t.Errorf("backpressure.memory_limit %s is above limits.memory %s: the kernel kills the pod first", ml, limit.String())
		}
		if warnings != "" {
			t.Errorf("config check warns:\n%s", warnings)
		}
	}

	// Credentials: each variable from the Secret is one Spillway reads,
	// under the Secret's key of the same name, and the Secret holds
	// nothing else.
	fromSecret := map[string]bool{}
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			continue
		}
		if e.ValueFrom.SecretKeyRef.Key != e.Name {
			t.Errorf("env %s is from Secret key %s: name the key after the variable", e.Name, e.ValueFrom.SecretKeyRef.Key)
		}
		fromSecret[e.ValueFrom.SecretKeyRef.Key] = true
		if !strings.HasPrefix(e.Name, "SPILLWAY_") && !slices.Contains(storageVariables, e.Name) {
			t.Errorf("env %s from the Secret: neither a SPILLWAY_ key nor a storage variable Spillway reads", e.Name)
		}
		// config check accepted every SPILLWAY_ variable above: an unknown
		// one is an error.
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for k := range fromSecret {
		if !strings.HasPrefix(k, "SPILLWAY_") && !bytes.Contains(readme, []byte("`"+k+"`")) {
			t.Errorf("env %s from the Secret: the README does not document it", k)
		}
	}
	for k := range o.secret.StringData {
		if !fromSecret[k] {
			t.Errorf("Secret %s key %s reaches no container", o.secret.Name, k)
		}
	}
	for k := range o.secret.Data {
		if !fromSecret[k] {
			t.Errorf("Secret %s key %s reaches no container", o.secret.Name, k)
		}
	}
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		t.Error("enableServiceLinks must be false: the pod's environment is then only what the manifest sets (Spillway ignores service links, but refuses other SPILLWAY_ variables it does not know)")
	}

	// The image's user, without root and with a read-only root file system
	// and a writable /tmp.
	psc, csc := spec.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || psc.RunAsGroup == nil ||
		fmt.Sprintf("%d:%d", *psc.RunAsUser, *psc.RunAsGroup) != img.user {
		t.Errorf("pod securityContext %+v, want runAsNonRoot and the image's USER %s", psc, img.user)
	}
	if csc == nil || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem ||
		csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		t.Errorf("container securityContext %+v, want readOnlyRootFilesystem and no privilege escalation", csc)
	}
	tmp := false
	for _, m := range c.VolumeMounts {
		for _, v := range spec.Volumes {
			if m.MountPath == "/tmp" && v.Name == m.Name && v.EmptyDir != nil {
				tmp = true
			}
		}
	}
	if !tmp {
		t.Error("no emptyDir at /tmp: the root file system is read-only")
	}
}

// TestManifestsReferToEachOther checks the names and selectors that tie
// the objects together.
func TestManifestsReferToEachOther(t *testing.T) {
	o := build(t)
	sts := o.sts
	podLabels := labels.Set(sts.Spec.Template.Labels)
	if sts.Spec.Selector == nil || !labels.SelectorFromSet(sts.Spec.Selector.MatchLabels).Matches(podLabels) || len(sts.Spec.Selector.MatchExpressions) > 0 {
		t.Errorf("StatefulSet selector %v does not select its pods %v", sts.Spec.Selector, podLabels)
	}
	if sts.Spec.ServiceName != o.svc.Name || o.svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("serviceName %q, Service %q with clusterIP %q: want the headless Service", sts.Spec.ServiceName, o.svc.Name, o.svc.Spec.ClusterIP)
	}
	if !labels.SelectorFromSet(o.svc.Spec.Selector).Matches(podLabels) {
		t.Errorf("Service selector %v does not select the pods %v", o.svc.Spec.Selector, podLabels)
	}
	for _, p := range o.svc.Spec.Ports {
		if containerPort(t, sts.Spec.Template.Spec.Containers[0], p.TargetPort) == 0 {
			t.Errorf("Service port %s targets %s, which the container does not have", p.Name, p.TargetPort.String())
		}
	}
	if o.pdb.Spec.Selector == nil || !labels.SelectorFromSet(o.pdb.Spec.Selector.MatchLabels).Matches(podLabels) {
		t.Errorf("PodDisruptionBudget selector %v does not select the pods %v", o.pdb.Spec.Selector, podLabels)
	}
	if sts.Spec.Template.Spec.ServiceAccountName != o.account.Name {
		t.Errorf("serviceAccountName %q, want %q", sts.Spec.Template.Spec.ServiceAccountName, o.account.Name)
	}
}

// containerPort resolves a probe's or a Service's port (a number or a
// port name) to the container's port number, 0 when it has none.
func containerPort(t *testing.T, c corev1.Container, p intstr.IntOrString) int32 {
	t.Helper()
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort
		}
	}
	return 0
}

// parseSize reads a size as config check prints it: a number and a unit
// of Spillway's (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB), or bytes.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			return v * u.mult, err
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

// TestNetworkPolicy checks that the NetworkPolicy isolates the pods for
// ingress and lets in, on the admin port alone, only the peers it names
// (Prometheus): no rule open to every source, no other port. The kubelet's
// probes come from the pod's node, which Kubernetes always lets in, so
// they need no rule; the probes must hit the admin port, the container's
// only one. Egress stays open (brokers, storage, DNS).
func TestNetworkPolicy(t *testing.T) {
	o := build(t)
	np, sts := o.netpol, o.sts
	c := sts.Spec.Template.Spec.Containers[0]
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	if sel.Empty() || !sel.Matches(labels.Set(sts.Spec.Template.Labels)) {
		t.Errorf("NetworkPolicy podSelector %v does not select the pods %v (alone)", np.Spec.PodSelector, sts.Spec.Template.Labels)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("policyTypes %v, want [Ingress]: egress to the brokers and storage stays open", np.Spec.PolicyTypes)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "admin" {
		t.Fatalf("container ports %v, want the admin port alone", c.Ports)
	}
	admin := c.Ports[0].ContainerPort
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || containerPort(t, c, p.HTTPGet.Port) != admin {
			t.Errorf("probe %+v is not on the admin port", p)
		}
	}
	if len(np.Spec.Ingress) == 0 {
		t.Fatal("no ingress rule: Prometheus could not scrape")
	}
	scrape := false
	for i, r := range np.Spec.Ingress {
		if len(r.From) == 0 {
			t.Errorf("ingress[%d] has no from: every source may connect", i)
		}
		if len(r.Ports) == 0 {
			t.Errorf("ingress[%d] has no ports: every port is open to it", i)
		}
		for _, p := range r.Ports {
			if p.Port == nil || containerPort(t, c, *p.Port) != admin || p.EndPort != nil ||
				(p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP) {
				t.Errorf("ingress[%d] port %+v, want the admin port (%d/TCP) alone", i, p, admin)
			}
		}
		for j, peer := range r.From {
			if peer.IPBlock != nil {
				t.Errorf("ingress[%d].from[%d]: an ipBlock; name Prometheus by selectors", i, j)
				continue
			}
			if peer.PodSelector == nil || len(peer.PodSelector.MatchLabels)+len(peer.PodSelector.MatchExpressions) == 0 {
				t.Errorf("ingress[%d].from[%d] %+v selects every pod of its namespaces; select Prometheus' pods", i, j, peer)
				continue
			}
			if peer.PodSelector.MatchLabels["app.kubernetes.io/name"] == "prometheus" {
				scrape = true
			}
		}
	}
	if !scrape {
		t.Error("no ingress rule lets Prometheus' pods (app.kubernetes.io/name: prometheus) in")
	}
}
