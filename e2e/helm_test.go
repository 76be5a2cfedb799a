//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/release"
	"sigs.k8s.io/yaml"
)

// Helm drives the Helm SDK (the same code as the helm CLI) in one namespace.
type Helm struct {
	t         testing.TB
	Namespace string
	cfg       *action.Configuration
}

// NewHelm returns a Helm bound to namespace ns (releases stored as Secrets, like the CLI).
func NewHelm(t testing.TB, ns string) *Helm {
	t.Helper()
	settings := cli.New()
	settings.KubeConfig = kubeconfigPath
	settings.SetNamespace(ns)
	cfg := new(action.Configuration)
	logf := func(format string, v ...interface{}) {
		if os.Getenv("E2E_HELM_DEBUG") == "1" {
			t.Logf("helm: "+format, v...)
		}
	}
	if err := cfg.Init(settings.RESTClientGetter(), ns, "secret", logf); err != nil {
		t.Fatalf("helm init: %v", err)
	}
	return &Helm{t: t, Namespace: ns, cfg: cfg}
}

// ChartPath is the path of a chart of this repository, e.g. ChartPath("valkey").
func ChartPath(name string) string { return filepath.Join(repoRoot, "charts", name) }

// LoadChart loads a chart directory. Every call loads it afresh (a few milliseconds): parallel tests must
// not share one *chart.Chart, which install and upgrade may modify.
func LoadChart(t testing.TB, path string) *chart.Chart {
	t.Helper()
	c, err := loader.Load(path)
	if err != nil {
		t.Fatalf("load chart %s: %v", path, err)
	}
	return c
}

// Values parses a YAML values document (test-friendly: Values(`replicas: 2`)).
func Values(t testing.TB, doc string) map[string]interface{} {
	t.Helper()
	v := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("values: %v\n%s", err, doc)
	}
	return v
}

// HelmOpts tunes install/upgrade/uninstall. Zero value: wait for resources, 5 minute timeout.
type HelmOpts struct {
	NoWait  bool
	Timeout time.Duration
	// ReuseValues and ResetThenReuseValues are helm upgrade's --reuse-values and --reset-then-reuse-values;
	// DryRun renders the upgrade (against the cluster) without applying it or storing a revision.
	ReuseValues, ResetThenReuseValues, DryRun bool
}

func (o HelmOpts) timeout() time.Duration {
	if o.Timeout == 0 {
		return 5 * time.Minute
	}
	return o.Timeout
}

func first(opts []HelmOpts) HelmOpts {
	if len(opts) > 0 {
		return opts[0]
	}
	return HelmOpts{}
}

// Install installs chartPath as release name with values, waiting (by default) until its resources
// are ready. The release is uninstalled when the test ends (unless already uninstalled).
func (h *Helm) Install(name, chartPath string, values map[string]interface{}, opts ...HelmOpts) *release.Release {
	h.t.Helper()
	rel, err := h.TryInstall(name, chartPath, values, opts...)
	if err != nil {
		h.t.Fatalf("helm install %s %s: %v", name, chartPath, err)
	}
	return rel
}

// TryInstall is Install returning the error (for tests that expect a refusal).
func (h *Helm) TryInstall(name, chartPath string, values map[string]interface{}, opts ...HelmOpts) (*release.Release, error) {
	h.t.Helper()
	o := first(opts)
	in := action.NewInstall(h.cfg)
	in.ReleaseName, in.Namespace = name, h.Namespace
	in.Wait, in.Timeout = !o.NoWait, o.timeout()
	start := time.Now()
	rel, err := in.Run(LoadChart(h.t, chartPath), values)
	if rel != nil {
		h.t.Cleanup(func() { h.uninstallIfPresent(name) })
	}
	if err == nil {
		h.t.Logf("helm install %s (%s) in %s: revision %d after %s", name, filepath.Base(chartPath), h.Namespace, rel.Version, time.Since(start).Round(time.Millisecond))
	}
	return rel, err
}

// Upgrade upgrades release name to chartPath with exactly these values (no reuse of old values).
func (h *Helm) Upgrade(name, chartPath string, values map[string]interface{}, opts ...HelmOpts) *release.Release {
	h.t.Helper()
	rel, err := h.TryUpgrade(name, chartPath, values, opts...)
	if err != nil {
		h.t.Fatalf("helm upgrade %s: %v", name, err)
	}
	return rel
}

// TryUpgrade is Upgrade returning the error.
func (h *Helm) TryUpgrade(name, chartPath string, values map[string]interface{}, opts ...HelmOpts) (*release.Release, error) {
	h.t.Helper()
	o := first(opts)
	up := action.NewUpgrade(h.cfg)
	up.Namespace = h.Namespace
	up.Wait, up.Timeout = !o.NoWait, o.timeout()
	up.ReuseValues, up.ResetThenReuseValues, up.DryRun = o.ReuseValues, o.ResetThenReuseValues, o.DryRun
	if o.DryRun {
		up.DryRunOption = "server" // render with the cluster's lookups, as the real upgrade would
	}
	start := time.Now()
	rel, err := up.Run(name, LoadChart(h.t, chartPath), values)
	if err == nil && o.DryRun {
		h.t.Logf("helm upgrade %s --dry-run: rendered after %s (nothing applied)", name, time.Since(start).Round(time.Millisecond))
	} else if err == nil {
		h.t.Logf("helm upgrade %s: revision %d after %s", name, rel.Version, time.Since(start).Round(time.Millisecond))
	}
	return rel, err
}

// Uninstall removes release name and (by default) waits until its resources are deleted.
func (h *Helm) Uninstall(name string, opts ...HelmOpts) {
	h.t.Helper()
	o := first(opts)
	un := action.NewUninstall(h.cfg)
	un.Wait, un.Timeout = !o.NoWait, o.timeout()
	if _, err := un.Run(name); err != nil {
		h.t.Fatalf("helm uninstall %s: %v", name, err)
	}
	h.t.Logf("helm uninstall %s", name)
}

func (h *Helm) uninstallIfPresent(name string) {
	if _, err := action.NewGet(h.cfg).Run(name); err != nil {
		return // already gone
	}
	un := action.NewUninstall(h.cfg) // no wait: the namespace deletion that follows waits for everything
	un.Timeout = 3 * time.Minute
	if _, err := un.Run(name); err != nil {
		h.t.Logf("cleanup: helm uninstall %s: %v", name, err)
	}
}

// Test runs `helm test name` and returns the test pods' logs; a failing test pod is an error.
func (h *Helm) Test(name string, timeout time.Duration) (string, error) {
	h.t.Helper()
	rt := action.NewReleaseTesting(h.cfg)
	rt.Namespace, rt.Timeout = h.Namespace, timeout
	rel, runErr := rt.Run(name)
	var logs bytes.Buffer
	if rel != nil {
		if err := rt.GetPodLogs(&logs, rel); err != nil {
			fmt.Fprintf(&logs, "(could not read test pod logs: %v)\n", err)
		}
	}
	if runErr != nil {
		return logs.String(), fmt.Errorf("helm test %s: %w\n%s", name, runErr, strings.TrimSpace(logs.String()))
	}
	return logs.String(), nil
}

// Get returns the deployed release name (nil, error when absent).
func (h *Helm) Get(name string) (*release.Release, error) { return action.NewGet(h.cfg).Run(name) }
