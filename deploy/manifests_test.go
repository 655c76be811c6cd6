package deploy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"
)

// object is one decoded manifest: its kind, name and the typed Kubernetes object.
type object struct {
	Kind, Name string
	Obj        any
	Source     string
}

// kinds maps apiVersion/kind to a constructor of its API type. A manifest of any other
// kind fails the build: each one must decode into a real type.
var kinds = map[string]func() any{
	"v1/Namespace":                            func() any { return &corev1.Namespace{} },
	"v1/ConfigMap":                            func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                               func() any { return &corev1.Secret{} },
	"v1/Service":                              func() any { return &corev1.Service{} },
	"apps/v1/StatefulSet":                     func() any { return &appsv1.StatefulSet{} },
	"apps/v1/Deployment":                      func() any { return &appsv1.Deployment{} },
	"policy/v1/PodDisruptionBudget":           func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1/NetworkPolicy":      func() any { return &networkingv1.NetworkPolicy{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &monitoringv1.ServiceMonitor{} },
}

// decodeStrict decodes one YAML document into its API type, refusing unknown fields
// and duplicate keys (sigs.k8s.io/yaml.UnmarshalStrict).
func decodeStrict(doc []byte, source string) (object, error) {
	var tm metav1.TypeMeta
	var meta struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return object{}, fmt.Errorf("%s: %w", source, err)
	}
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return object{}, fmt.Errorf("%s: %w", source, err)
	}
	mk, ok := kinds[tm.APIVersion+"/"+tm.Kind]
	if !ok {
		return object{}, fmt.Errorf("%s: no API type for %s %s", source, tm.APIVersion, tm.Kind)
	}
	obj := mk()
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return object{}, fmt.Errorf("%s: %s %s: %w", source, tm.Kind, meta.Metadata.Name, err)
	}
	if meta.Metadata.Name == "" {
		return object{}, fmt.Errorf("%s: %s without a name", source, tm.Kind)
	}
	return object{Kind: tm.Kind, Name: meta.Metadata.Name, Obj: obj, Source: source}, nil
}

// splitDocs splits a multi-document YAML file; empty documents are dropped.
func splitDocs(b []byte) [][]byte {
	var out [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(stripComments(d)) != "" {
			out = append(out, []byte(d))
		}
	}
	return out
}

func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// kustomization is the subset of kustomize this repository uses. Strict decoding
// makes any other field (a generator, a transformer) fail the build loudly instead of
// being silently ignored by this test's builder.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources"`
	Patches    []struct {
		Path string `json:"path"`
	} `json:"patches,omitempty"`
}

// build renders a kustomization directory as kustomize does for these features:
// resources (files and kustomization directories) in order, strategic-merge patches
// matched by kind and name, then the namespace on every namespaced object. Every
// object is decoded strictly, before and after patching.
func build(dir string) ([]object, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(raw, &k); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: %w", dir, err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		return nil, fmt.Errorf("%s: not a Kustomization: %s %s", dir, k.APIVersion, k.Kind)
	}
	var objs []object
	for _, r := range k.Resources {
		p := filepath.Join(dir, r)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			sub, err := build(p)
			if err != nil {
				return nil, err
			}
			objs = append(objs, sub...)
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		for i, d := range splitDocs(b) {
			o, err := decodeStrict(d, fmt.Sprintf("%s#%d", p, i))
			if err != nil {
				return nil, err
			}
			objs = append(objs, o)
		}
	}
	seen := map[string]bool{}
	for _, o := range objs {
		if seen[o.Kind+"/"+o.Name] {
			return nil, fmt.Errorf("%s: %s %s defined twice", dir, o.Kind, o.Name)
		}
		seen[o.Kind+"/"+o.Name] = true
	}
	for _, pt := range k.Patches {
		p := filepath.Join(dir, pt.Path)
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		patchJSON, err := yaml.YAMLToJSON(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		target, err := decodeStrict(b, p) // the patch itself must be a valid partial object
		if err != nil {
			return nil, err
		}
		i := indexOf(objs, target.Kind, target.Name)
		if i < 0 {
			return nil, fmt.Errorf("%s: patch target %s %s is not in the resources", p, target.Kind, target.Name)
		}
		orig, err := json.Marshal(objs[i].Obj)
		if err != nil {
			return nil, err
		}
		merged, err := strategicpatch.StrategicMergePatch(orig, patchJSON, kinds[apiKey(objs[i].Obj)]())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		o, err := decodeStrict(merged, p+" applied")
		if err != nil {
			return nil, err
		}
		objs[i] = o
	}
	if k.Namespace != "" {
		for _, o := range objs {
			if m := objectMeta(o.Obj); m != nil && o.Kind != "Namespace" {
				if m.Namespace != "" && m.Namespace != k.Namespace {
					return nil, fmt.Errorf("%s: %s %s is in namespace %s, the kustomization's is %s", dir, o.Kind, o.Name, m.Namespace, k.Namespace)
				}
				m.Namespace = k.Namespace
			}
		}
	}
	return objs, nil
}

func apiKey(obj any) string {
	for k, mk := range kinds {
		if fmt.Sprintf("%T", mk()) == fmt.Sprintf("%T", obj) {
			return k
		}
	}
	return ""
}

func objectMeta(obj any) *metav1.ObjectMeta {
	if a, ok := obj.(interface{ GetObjectMeta() metav1.Object }); ok {
		if m, ok := a.GetObjectMeta().(*metav1.ObjectMeta); ok {
			return m
		}
	}
	return nil
}

func indexOf(objs []object, kind, name string) int {
	for i, o := range objs {
		if o.Kind == kind && o.Name == name {
			return i
		}
	}
	return -1
}

func get[T any](t *testing.T, objs []object, kind, name string) T {
	t.Helper()
	i := indexOf(objs, kind, name)
	if i < 0 {
		t.Fatalf("no %s %s", kind, name)
	}
	v, ok := objs[i].Obj.(T)
	if !ok {
		t.Fatalf("%s %s is a %T", kind, name, objs[i].Obj)
	}
	return v
}

// builds are the kustomizations a user applies.
var builds = []string{"base", "overlays/s3", "overlays/azure"}

// TestManifestsDecodeStrictly: every manifest file (base, overlay resources and the
// patches) decodes into its Kubernetes API type with no unknown field, and every
// kustomization builds.
func TestManifestsDecodeStrictly(t *testing.T) {
	for _, b := range builds {
		objs, err := build(b)
		if err != nil {
			t.Fatalf("build %s: %v", b, err)
		}
		var names []string
		for _, o := range objs {
			names = append(names, o.Kind+"/"+o.Name)
		}
		sort.Strings(names)
		t.Logf("%s: %d objects: %s", b, len(objs), strings.Join(names, " "))
		for _, want := range []string{"StatefulSet/etcd", "StatefulSet/lancectx-worker", "Deployment/lancectx-master",
			"PodDisruptionBudget/etcd", "PodDisruptionBudget/lancectx-worker", "PodDisruptionBudget/lancectx-master",
			"NetworkPolicy/etcd", "ServiceMonitor/lancectx", "Secret/lancectx-api-tokens", "Secret/lancectx-storage-credentials"} {
			if indexOf(objs, strings.Split(want, "/")[0], strings.Split(want, "/")[1]) < 0 {
				t.Errorf("%s: no %s", b, want)
			}
		}
	}
}

// TestStrictDecodingRejectsUnknownFields shows the decoder can fail: a misspelled
// field (readinessProbes) of a real manifest is refused, not dropped.
func TestStrictDecodingRejectsUnknownFields(t *testing.T) {
	b, err := os.ReadFile("base/worker.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Replace(b, []byte("readinessProbe:"), []byte("readinessProbes:"), 1)
	var failed bool
	for i, d := range splitDocs(bad) {
		if _, err := decodeStrict(d, fmt.Sprint("worker.yaml#", i)); err != nil {
			if !strings.Contains(err.Error(), "readinessProbes") {
				t.Fatalf("error %v does not name the field", err)
			}
			failed = true
		}
	}
	if !failed {
		t.Fatal("a misspelled field decoded without error")
	}
}

// podSpecOf returns the pod template of a workload.
func containerOf(t *testing.T, objs []object, kind, name, container string) (corev1.PodTemplateSpec, corev1.Container) {
	t.Helper()
	var tpl corev1.PodTemplateSpec
	switch kind {
	case "StatefulSet":
		tpl = get[*appsv1.StatefulSet](t, objs, kind, name).Spec.Template
	case "Deployment":
		tpl = get[*appsv1.Deployment](t, objs, kind, name).Spec.Template
	}
	for _, c := range tpl.Spec.Containers {
		if c.Name == container {
			return tpl, c
		}
	}
	t.Fatalf("%s %s has no container %s", kind, name, container)
	return tpl, corev1.Container{}
}

// resolveEnv computes a container's environment as the kubelet would: envFrom Secrets
// and ConfigMaps, then env in order with configMapKeyRef, secretKeyRef and fieldRef
// (metadata.name, metadata.namespace, status.podIP) resolved and $(VAR) expanded.
func resolveEnvErr(objs []object, c corev1.Container, podName, podIP string) (map[string]string, error) {
	env := map[string]string{}
	data := func(kind, name string) map[string]string {
		i := indexOf(objs, kind, name)
		if i < 0 {
			return nil
		}
		switch o := objs[i].Obj.(type) {
		case *corev1.ConfigMap:
			return o.Data
		case *corev1.Secret:
			m := map[string]string{}
			for k, v := range o.Data {
				m[k] = string(v)
			}
			for k, v := range o.StringData {
				m[k] = v
			}
			return m
		}
		return nil
	}
	for _, ef := range c.EnvFrom {
		var m map[string]string
		switch {
		case ef.SecretRef != nil:
			m = data("Secret", ef.SecretRef.Name)
			if m == nil && (ef.SecretRef.Optional == nil || !*ef.SecretRef.Optional) {
				return nil, fmt.Errorf("container %s: envFrom Secret %s does not exist", c.Name, ef.SecretRef.Name)
			}
		case ef.ConfigMapRef != nil:
			m = data("ConfigMap", ef.ConfigMapRef.Name)
		}
		for k, v := range m {
			env[ef.Prefix+k] = v
		}
	}
	expand := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for _, e := range c.Env {
		v := e.Value
		switch {
		case e.ValueFrom == nil:
			v = expand.ReplaceAllStringFunc(v, func(s string) string {
				if x, ok := env[s[2:len(s)-1]]; ok {
					return x
				}
				return s
			})
		case e.ValueFrom.ConfigMapKeyRef != nil:
			r := e.ValueFrom.ConfigMapKeyRef
			m := data("ConfigMap", r.Name)
			x, ok := m[r.Key]
			if !ok {
				return nil, fmt.Errorf("container %s: env %s: ConfigMap %s has no key %s", c.Name, e.Name, r.Name, r.Key)
			}
			v = x
		case e.ValueFrom.SecretKeyRef != nil:
			r := e.ValueFrom.SecretKeyRef
			x, ok := data("Secret", r.Name)[r.Key]
			if !ok {
				return nil, fmt.Errorf("container %s: env %s: Secret %s has no key %s", c.Name, e.Name, r.Name, r.Key)
			}
			v = x
		case e.ValueFrom.FieldRef != nil:
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.name":
				v = podName
			case "status.podIP":
				v = podIP
			case "metadata.namespace":
				v = "lancectx"
			default:
				return nil, fmt.Errorf("container %s: env %s: fieldRef %s not resolved by this test", c.Name, e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		default:
			return nil, fmt.Errorf("container %s: env %s: unsupported valueFrom", c.Name, e.Name)
		}
		env[e.Name] = v
	}
	return env, nil
}

func resolveEnv(t *testing.T, objs []object, c corev1.Container, podName, podIP string) map[string]string {
	t.Helper()
	env, err := resolveEnvErr(objs, c, podName, podIP)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// findContainer returns a container of a workload's pod template.
func findContainer(objs []object, kind, name, container string) (corev1.Container, error) {
	i := indexOf(objs, kind, name)
	if i < 0 {
		return corev1.Container{}, fmt.Errorf("no %s %s", kind, name)
	}
	var spec corev1.PodSpec
	switch x := objs[i].Obj.(type) {
	case *appsv1.StatefulSet:
		spec = x.Spec.Template.Spec
	case *appsv1.Deployment:
		spec = x.Spec.Template.Spec
	}
	for _, c := range spec.Containers {
		if c.Name == container {
			return c, nil
		}
	}
	return corev1.Container{}, fmt.Errorf("%s %s has no container %s", kind, name, container)
}

// buildManifests is build, named for the running tests.
func buildManifests(dir string) ([]object, error) { return build(dir) }

// TestManifestInvariants checks, in the base and in both overlays, what the binaries
// rely on: workers take INSTANCE_ID from the pod name (the WAL shard identity);
// masters and workers resolve the same etcd endpoints, etcd prefix and data URI; the
// overlays point the data URI at their object store; etcd endpoints name members of
// the etcd StatefulSet through its headless Service; every selector matches a pod
// template; every probe's port is a named container port.
func TestManifestInvariants(t *testing.T) {
	for _, b := range builds {
		t.Run(strings.ReplaceAll(b, "/", "_"), func(t *testing.T) {
			objs, err := build(b)
			if err != nil {
				t.Fatal(err)
			}
			wtpl, wc := containerOf(t, objs, "StatefulSet", "lancectx-worker", "worker")
			_, mc := containerOf(t, objs, "Deployment", "lancectx-master", "master")

			// INSTANCE_ID from the pod name, and nothing overriding it.
			var inst *corev1.EnvVar
			for i := range wc.Env {
				switch wc.Env[i].Name {
				case "INSTANCE_ID":
					inst = &wc.Env[i]
				case "LANCECTX_WORKER_ID":
					t.Errorf("worker sets LANCECTX_WORKER_ID, which wins over INSTANCE_ID")
				}
			}
			if inst == nil || inst.ValueFrom == nil || inst.ValueFrom.FieldRef == nil || inst.ValueFrom.FieldRef.FieldPath != "metadata.name" {
				t.Fatalf("worker INSTANCE_ID is not the pod name: %+v", inst)
			}
			wenv := resolveEnv(t, objs, wc, "lancectx-worker-2", "10.0.0.12")
			menv := resolveEnv(t, objs, mc, "lancectx-master-7f9c-abcde", "10.0.0.21")
			if wenv["INSTANCE_ID"] != "lancectx-worker-2" {
				t.Fatalf("INSTANCE_ID resolves to %q", wenv["INSTANCE_ID"])
			}
			// The master reads DATA_DIR before LANCECTX_DATA_DIR: it must not be set
			// apart from the worker's.
			if _, ok := menv["DATA_DIR"]; ok {
				t.Errorf("master sets DATA_DIR, which the worker does not read")
			}
			for _, k := range []string{"LANCECTX_DATA_DIR", "ETCD_ENDPOINTS", "ETCD_PREFIX"} {
				if wenv[k] == "" || wenv[k] != menv[k] {
					t.Errorf("%s: worker %q, master %q: they must share it", k, wenv[k], menv[k])
				}
			}
			wantScheme := map[string]string{"base": "file://", "overlays/s3": "s3://", "overlays/azure": "az://"}[b]
			if !strings.HasPrefix(wenv["LANCECTX_DATA_DIR"], wantScheme) {
				t.Errorf("data URI %q, want %s...", wenv["LANCECTX_DATA_DIR"], wantScheme)
			}
			if wenv["LANCECTX_ADVERTISE_URL"] != "http://lancectx-worker-2.lancectx-worker:3000" {
				t.Errorf("worker advertise URL %q", wenv["LANCECTX_ADVERTISE_URL"])
			}
			if menv["MASTER_ID"] != "lancectx-master-7f9c-abcde" || menv["MASTER_ADVERTISE_URL"] != "http://10.0.0.21:8090" {
				t.Errorf("master id %q, advertise %q", menv["MASTER_ID"], menv["MASTER_ADVERTISE_URL"])
			}
			// The credentials the overlay fills reach both.
			creds := map[string][]string{"overlays/s3": {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"},
				"overlays/azure": {"AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY"}}[b]
			for _, k := range creds {
				if wenv[k] == "" || menv[k] == "" {
					t.Errorf("%s does not reach the worker and the master", k)
				}
			}

			// The worker StatefulSet's stable names come from a headless Service.
			ss := get[*appsv1.StatefulSet](t, objs, "StatefulSet", "lancectx-worker")
			if svc := get[*corev1.Service](t, objs, "Service", ss.Spec.ServiceName); svc.Spec.ClusterIP != corev1.ClusterIPNone {
				t.Errorf("worker serviceName %s is not headless", ss.Spec.ServiceName)
			}
			if !strings.Contains(wenv["LANCECTX_ADVERTISE_URL"], "."+ss.Spec.ServiceName+":") {
				t.Errorf("advertise URL %q is not the pod's name under %s", wenv["LANCECTX_ADVERTISE_URL"], ss.Spec.ServiceName)
			}
			// etcd endpoints: members 0..replicas-1 of the etcd StatefulSet.
			ess := get[*appsv1.StatefulSet](t, objs, "StatefulSet", "etcd")
			if *ess.Spec.Replicas != 3 {
				t.Errorf("etcd replicas %d", *ess.Spec.Replicas)
			}
			if esvc := get[*corev1.Service](t, objs, "Service", ess.Spec.ServiceName); esvc.Spec.ClusterIP != corev1.ClusterIPNone || !esvc.Spec.PublishNotReadyAddresses {
				t.Errorf("etcd service %s must be headless and publish not-ready addresses", ess.Spec.ServiceName)
			}
			eps := strings.Split(wenv["ETCD_ENDPOINTS"], ",")
			if len(eps) != int(*ess.Spec.Replicas) {
				t.Errorf("etcd endpoints %v for %d members", eps, *ess.Spec.Replicas)
			}
			for i, ep := range eps {
				if want := fmt.Sprintf("http://etcd-%d.%s:2379", i, ess.Spec.ServiceName); ep != want {
					t.Errorf("etcd endpoint %q, want %q", ep, want)
				}
			}
			if d := get[*appsv1.Deployment](t, objs, "Deployment", "lancectx-master"); *d.Spec.Replicas != 3 {
				t.Errorf("master replicas %d", *d.Spec.Replicas)
			}

			// Selectors match pod templates.
			templates := map[string]map[string]string{"worker": wtpl.Labels}
			mtpl, _ := containerOf(t, objs, "Deployment", "lancectx-master", "master")
			etpl := ess.Spec.Template
			templates["master"], templates["etcd"] = mtpl.Labels, etpl.Labels
			matches := func(sel map[string]string) []string {
				var out []string
				for n, l := range templates {
					ok := true
					for k, v := range sel {
						ok = ok && l[k] == v
					}
					if ok {
						out = append(out, n)
					}
				}
				sort.Strings(out)
				return out
			}
			for _, o := range objs {
				var sel map[string]string
				switch x := o.Obj.(type) {
				case *corev1.Service:
					sel = x.Spec.Selector
				case *policyv1.PodDisruptionBudget:
					sel = x.Spec.Selector.MatchLabels
				case *appsv1.StatefulSet:
					sel = x.Spec.Selector.MatchLabels
				case *appsv1.Deployment:
					sel = x.Spec.Selector.MatchLabels
				default:
					continue
				}
				if got := matches(sel); len(got) != 1 {
					t.Errorf("%s %s selects %v, want exactly one component", o.Kind, o.Name, got)
				}
			}
			// The ServiceMonitor scrapes the master Service and the headless worker
			// Service (once each), on their port named in the endpoint.
			sm := get[*monitoringv1.ServiceMonitor](t, objs, "ServiceMonitor", "lancectx")
			var scraped []string
			for _, o := range objs {
				svc, ok := o.Obj.(*corev1.Service)
				if !ok {
					continue
				}
				sel := true
				for k, v := range sm.Spec.Selector.MatchLabels {
					sel = sel && svc.Labels[k] == v
				}
				if !sel {
					continue
				}
				scraped = append(scraped, svc.Name)
				for _, ep := range sm.Spec.Endpoints {
					found := false
					for _, p := range svc.Spec.Ports {
						found = found || p.Name == ep.Port
					}
					if !found {
						t.Errorf("ServiceMonitor port %q not on Service %s", ep.Port, svc.Name)
					}
				}
			}
			sort.Strings(scraped)
			if strings.Join(scraped, ",") != "lancectx-master,lancectx-worker" {
				t.Errorf("ServiceMonitor scrapes %v", scraped)
			}
			// Probes: HTTP GETs on a named container port.
			for _, c := range []corev1.Container{wc, mc} {
				for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
					if p == nil || p.HTTPGet == nil {
						t.Fatalf("container %s lacks an HTTP readiness or liveness probe", c.Name)
					}
					if probePort(c, p.HTTPGet) == 0 {
						t.Errorf("container %s: probe port %v is not a container port", c.Name, p.HTTPGet.Port.String())
					}
				}
				if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
					t.Errorf("container %s: requests and a memory limit are required", c.Name)
				}
				if c.SecurityContext == nil || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation {
					t.Errorf("container %s: privilege escalation not off", c.Name)
				}
			}
		})
	}
}

// probePort is the container port a probe's HTTPGet names (by name or number), 0 if none.
func probePort(c corev1.Container, g *corev1.HTTPGetAction) int32 {
	for _, p := range c.Ports {
		if (g.Port.StrVal != "" && g.Port.StrVal == p.Name) || (g.Port.StrVal == "" && g.Port.IntVal == p.ContainerPort) {
			return p.ContainerPort
		}
	}
	return 0
}

// envReadBySDK are variables the AWS SDK reads itself (lancectx passes its default
// credential chain); no lancectx source names them as strings.
var envReadBySDK = map[string]bool{"AWS_ACCESS_KEY_ID": true, "AWS_SECRET_ACCESS_KEY": true, "AWS_SESSION_TOKEN": true,
	"AWS_REGION": true, "AWS_DEFAULT_REGION": true, "AWS_PROFILE": true}

// TestEnvNamesAreReadByTheBinaries: every environment variable the manifests give a
// lancectx container is a string literal of the program's non-test Go source (the
// flags' env lookups, master.SettingsEnv, coord, objstore, the health probe), a
// variable the AWS SDK reads, or a helper only used for $(VAR) expansion in another
// value. A misspelled name (ETCD_ENDPOINT) would be silently ignored by the binary.
func TestEnvNamesAreReadByTheBinaries(t *testing.T) {
	literals := map[string]bool{}
	lit := regexp.MustCompile(`"([A-Z][A-Z0-9_]{2,})"`)
	for _, root := range []string{"../cmd/lancectx", "../master", "../worker", "../coord", "../objstore", "../auth", "healthcheck"} {
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			for _, m := range lit.FindAllSubmatch(b, -1) {
				literals[string(m[1])] = true
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range builds {
		objs, err := build(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []struct{ kind, name, c string }{{"StatefulSet", "lancectx-worker", "worker"}, {"Deployment", "lancectx-master", "master"}} {
			_, c := containerOf(t, objs, w.kind, w.name, w.c)
			env := resolveEnv(t, objs, c, "pod-0", "10.0.0.1")
			var all strings.Builder
			for _, e := range c.Env {
				all.WriteString(e.Value + "\n")
			}
			for name := range env {
				switch {
				case literals[name], envReadBySDK[name]:
				case strings.Contains(all.String(), "$("+name+")"):
				default:
					t.Errorf("%s: %s %s sets %s, which no lancectx source reads", b, w.kind, w.name, name)
				}
			}
		}
	}
	if !literals["INSTANCE_ID"] || !literals["ETCD_PREFIX"] || literals["ETCD_ENDPOINT"] {
		t.Fatal("the source scan is broken")
	}
}
