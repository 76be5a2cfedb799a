package templatestests

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"

	"github.com/valkey-ha/valkey-ha/internal/chartjobs/credentials"
	"k8s.io/client-go/kubernetes/fake"
)

const (
	testNamespace = "ns1"
	valkeyRelease = "cache"
	valkeyF       = "cache-valkey"
	sentinelRel   = "quorum"
)

var (
	chartCache   = map[string]*chart.Chart{}
	chartCacheMu sync.Mutex
)

// skipProcesses skips the test under -short (make quick runs pure tests only): it starts what it names. Tests
// that start engines skip through valkeytest.Require instead.
func skipProcesses(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs " + what + ": skipped under -short (make quick runs pure tests only)")
	}
}

func chartPath(name string) string { return filepath.Join("..", "charts", name) }

func loadChart(t testing.TB, name string) *chart.Chart {
	t.Helper()
	chartCacheMu.Lock()
	defer chartCacheMu.Unlock()
	if c, ok := chartCache[name]; ok {
		return c
	}
	c, err := loader.Load(chartPath(name))
	if err != nil {
		t.Fatalf("load chart %s: %v", name, err)
	}
	chartCache[name] = c
	return c
}

// renderOpts tune one render.
type renderOpts struct {
	release   string
	namespace string // default testNamespace
	upgrade   bool
	existing  []runtime.Object // objects that `lookup` finds (validation-only lookups: nothing rendered changes)
	withNotes bool
	revision  int // the Helm revision (0: 1)
	// secrets are what the cluster holds when the credentials Job runs (renderInstance), at credentialsAt
	// (zero: now).
	secrets       []*corev1.Secret
	credentialsAt time.Time
}

// renderChart renders a chart the way `helm install` does: values coalesced and validated against
// values.schema.json by chartutil.ToRenderValues, then engine.Render (with a fake cluster for lookup
// when existing objects are given).
func renderChart(t testing.TB, name, valuesYAML string, o renderOpts) (map[string]string, error) {
	t.Helper()
	c := loadChart(t, name)
	vals, err := chartutil.ReadValues([]byte(valuesYAML))
	if err != nil {
		t.Fatalf("values: %v", err)
	}
	rel := o.release
	if rel == "" {
		if name == "valkey" {
			rel = valkeyRelease
		} else {
			rel = sentinelRel
		}
	}
	ns := o.namespace
	if ns == "" {
		ns = testNamespace
	}
	opts := chartutil.ReleaseOptions{Name: rel, Namespace: ns, Revision: max(1, o.revision), IsInstall: !o.upgrade, IsUpgrade: o.upgrade}
	top, err := chartutil.ToRenderValues(c, vals, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	var out map[string]string
	if o.existing != nil {
		out, err = engine.RenderWithClientProvider(c, top, fakeProvider{objs: o.existing})
	} else {
		out, err = engine.Render(c, top)
	}
	if err != nil {
		return nil, err
	}
	if !o.withNotes {
		for k := range out {
			if strings.HasSuffix(k, "NOTES.txt") {
				delete(out, k)
			}
		}
	}
	return out, nil
}

// fakeProvider answers `lookup` from a fake dynamic client.
type fakeProvider struct{ objs []runtime.Object }

var kindResources = map[string]string{"Secret": "secrets", "ConfigMap": "configmaps", "ServiceAccount": "serviceaccounts", "StatefulSet": "statefulsets", "Service": "services"}

func (f fakeProvider) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, false, err
	}
	res, ok := kindResources[kind]
	if !ok {
		return nil, false, fmt.Errorf("fake provider: kind %s not supported", kind)
	}
	var objs []runtime.Object
	for _, o := range f.objs {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, false, err
		}
		uo := &unstructured.Unstructured{Object: u}
		gvk := o.GetObjectKind().GroupVersionKind()
		if gvk.Kind == "" {
			gvks, _, err := scheme.Scheme.ObjectKinds(o)
			if err != nil {
				return nil, false, err
			}
			gvk = gvks[0]
		}
		uo.SetGroupVersionKind(gvk)
		objs = append(objs, uo)
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{
			{Version: "v1", Resource: "secrets"}:                     "SecretList",
			{Version: "v1", Resource: "configmaps"}:                  "ConfigMapList",
			{Version: "v1", Resource: "serviceaccounts"}:             "ServiceAccountList",
			{Version: "v1", Resource: "services"}:                    "ServiceList",
			{Group: "apps", Version: "v1", Resource: "statefulsets"}: "StatefulSetList",
		}, objs...)
	return client.Resource(gv.WithResource(res)), true, nil
}

// mustRender renders and fails the test on error.
func mustRender(t testing.TB, name, valuesYAML string, o ...renderOpts) map[string]string {
	t.Helper()
	var opt renderOpts
	if len(o) > 0 {
		opt = o[0]
	}
	out, err := renderChart(t, name, valuesYAML, opt)
	if err != nil {
		t.Fatalf("render %s: %v", name, err)
	}
	return out
}

// objects is a decoded render.
type objects struct {
	list []runtime.Object
}

// decode splits the rendered files into manifests and decodes each into a typed object (unstructured for
// kinds outside client-go's scheme: the Prometheus operator's and cert-manager's).
func decode(t testing.TB, files map[string]string) objects {
	t.Helper()
	names := make([]string, 0, len(files))
	for k := range files {
		names = append(names, k)
	}
	sort.Strings(names)
	var res objects
	for _, fn := range names {
		if strings.HasSuffix(fn, "NOTES.txt") {
			continue
		}
		manifests := releaseutil.SplitManifests(files[fn])
		keys := make([]string, 0, len(manifests))
		for k := range manifests {
			keys = append(keys, k)
		}
		sort.Sort(releaseutil.BySplitManifestsOrder(keys))
		for _, k := range keys {
			m := manifests[k]
			if strings.TrimSpace(stripComments(m)) == "" {
				continue
			}
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(m), nil, nil)
			if err != nil {
				u := &unstructured.Unstructured{}
				if yerr := yaml.Unmarshal([]byte(m), &u.Object); yerr != nil || u.GetKind() == "" {
					t.Fatalf("%s: decode: %v\n%s", fn, err, m)
				}
				if !strings.Contains(u.GetAPIVersion(), "monitoring.coreos.com") && !strings.HasPrefix(u.GetAPIVersion(), "cert-manager.io/") {
					t.Fatalf("%s: decode %s: %v", fn, u.GetKind(), err)
				}
				obj = u
			}
			res.list = append(res.list, obj)
		}
	}
	return res
}

func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

func kindOf(o runtime.Object) string {
	if u, ok := o.(*unstructured.Unstructured); ok {
		return u.GetKind()
	}
	gvks, _, err := scheme.Scheme.ObjectKinds(o)
	if err != nil || len(gvks) == 0 {
		return fmt.Sprintf("%T", o)
	}
	return gvks[0].Kind
}

func nameOf(o runtime.Object) string {
	m, err := meta.Accessor(o)
	if err != nil {
		return ""
	}
	return m.GetName()
}

func objMeta(o runtime.Object) metav1.Object {
	m, _ := meta.Accessor(o)
	return m
}

func (os objects) ofKind(kind string) []runtime.Object {
	var r []runtime.Object
	for _, o := range os.list {
		if kindOf(o) == kind {
			r = append(r, o)
		}
	}
	return r
}

func (os objects) get(t testing.TB, kind, name string) runtime.Object {
	t.Helper()
	for _, o := range os.list {
		if kindOf(o) == kind && nameOf(o) == name {
			return o
		}
	}
	t.Fatalf("no %s %q rendered", kind, name)
	return nil
}

func (os objects) statefulSets() []*appsv1.StatefulSet {
	var r []*appsv1.StatefulSet
	for _, o := range os.ofKind("StatefulSet") {
		r = append(r, o.(*appsv1.StatefulSet))
	}
	return r
}

func (os objects) configMap(t testing.TB, name string) *corev1.ConfigMap {
	t.Helper()
	return os.get(t, "ConfigMap", name).(*corev1.ConfigMap)
}

func (os objects) secret(t testing.TB, name string) *corev1.Secret {
	t.Helper()
	return os.get(t, "Secret", name).(*corev1.Secret)
}

func (os objects) service(t testing.TB, name string) *corev1.Service {
	t.Helper()
	return os.get(t, "Service", name).(*corev1.Service)
}

// podSpecs returns every pod spec rendered (workloads and bare pods), keyed by "Kind/name".
func (os objects) podSpecs() map[string]*corev1.PodSpec {
	r := map[string]*corev1.PodSpec{}
	for _, o := range os.list {
		switch v := o.(type) {
		case *appsv1.StatefulSet:
			r["StatefulSet/"+v.Name] = &v.Spec.Template.Spec
		case *appsv1.Deployment:
			r["Deployment/"+v.Name] = &v.Spec.Template.Spec
		case *corev1.Pod:
			r["Pod/"+v.Name] = &v.Spec
		}
	}
	return r
}

// secretFromRender turns a rendered Secret into an object the fake cluster returns on lookup.
func asExisting(s *corev1.Secret) *corev1.Secret {
	c := s.DeepCopy()
	c.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}
	if c.Data == nil {
		c.Data = map[string][]byte{}
	}
	for k, v := range c.StringData {
		c.Data[k] = []byte(v)
	}
	c.StringData = nil
	return c
}

// runCredentials runs, at now, what the chart's credentials Job runs (internal/chartjobs/credentials with the spec.json of
// the rendered Secret F-acl-spec) against a fake API server that holds the rendered descriptor and existing. It
// returns the rendered objects plus every Secret the server then holds (the cluster once the Job ran; a rendered
// Secret of the same name is replaced) and what the step refused.
func runCredentials(t testing.TB, objs objects, now time.Time, existing ...*corev1.Secret) (objects, []string) {
	t.Helper()
	sp, err := credentials.ParseSpec(objs.secret(t, valkeyF+"-acl-spec").Data[credentials.SpecKey])
	if err != nil {
		t.Fatalf("the rendered spec: %v", err)
	}
	cm := objs.configMap(t, sp.Owner).DeepCopy()
	cm.UID = types.UID("uid-" + cm.Name)
	seed := []runtime.Object{cm}
	for _, s := range existing {
		c := asExisting(s)
		c.Namespace = testNamespace
		seed = append(seed, c)
	}
	cs := fake.NewClientset(seed...)
	var refused []string
	for pass := 0; ; pass++ {
		if pass == 5 {
			t.Fatalf("the credentials step still writes after %d passes", pass)
		}
		r, err := credentials.Ensure(context.Background(), cs, testNamespace, sp, now, credentials.GeneratePassword)
		if err != nil {
			t.Fatalf("credentials step: %v", err)
		}
		refused = r.Refused
		if len(r.Created)+len(r.Updated) == 0 && !r.ACLWritten {
			break
		}
	}
	list, err := cs.CoreV1().Secrets(testNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{}
	var out objects
	for i := range list.Items {
		s := list.Items[i].DeepCopy()
		s.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}
		held[s.Name] = true
		out.list = append(out.list, s)
	}
	for _, o := range objs.list {
		if kindOf(o) == "Secret" && held[nameOf(o)] {
			continue
		}
		out.list = append(out.list, o)
	}
	return out, refused
}

// withCredentials is runCredentials now, failing the test on a refusal.
func withCredentials(t testing.TB, objs objects, existing ...*corev1.Secret) objects {
	t.Helper()
	out, refused := runCredentials(t, objs, time.Now(), existing...)
	if len(refused) > 0 {
		t.Fatalf("the credentials step refused: %v", refused)
	}
	return out
}

// installedValkey renders charts/valkey and runs its credentials Job's step: the objects a cluster holds once
// the release is installed (rendered objects plus the Secrets written at run time).
func installedValkey(t testing.TB, values string, o ...renderOpts) objects {
	t.Helper()
	var secrets []*corev1.Secret
	if len(o) > 0 {
		secrets = o[0].secrets
	}
	return withCredentials(t, decode(t, mustRender(t, "valkey", values, o...)), secrets...)
}
