package templatestests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

// sharedSource is the one source of the named templates both charts define the same way (docs/design.md,
// "Shared chart templates"): PREFIX. stands for the chart's template prefix (valkey. or vs.).
var sharedSource = filepath.Join("..", "charts", "_shared", "helpers.tpl")

// sharedTemplate is charts/_shared/helpers.tpl as charts/<chart>/templates/_shared.tpl holds it: a header
// saying it is generated, then the source with the chart's prefix.
func sharedTemplate(t testing.TB, chart string) string {
	t.Helper()
	src, err := os.ReadFile(sharedSource)
	require.NoError(t, err)
	head := "{{/* GENERATED from charts/_shared/helpers.tpl by `go test ./templates-tests -run TestSharedTemplatesGenerated -update`;\ndo not edit here: edit charts/_shared/helpers.tpl (PREFIX. is this chart's " + prefixOf(chart) + ".) and rerun. */}}\n\n"
	return head + strings.ReplaceAll(string(src), "PREFIX.", prefixOf(chart)+".")
}

// TestSharedTemplatesGenerated fails when a chart's generated _shared.tpl is not charts/_shared/helpers.tpl
// with its prefix (someone edited the copy, or the source without -update); with -update it writes them. The
// charts stay self-contained: the copies are checked in, so `helm install ./charts/<chart>` and `helm package`
// need no dependency step.
func TestSharedTemplatesGenerated(t *testing.T) {
	for _, chart := range []string{"valkey", "valkey-sentinel"} {
		t.Run(chart, func(t *testing.T) {
			got := checkGenerated(t, filepath.Join(chartPath(chart), "templates", "_shared.tpl"), sharedTemplate(t, chart),
				"stale: edit charts/_shared/helpers.tpl, then run go test ./templates-tests -run TestSharedTemplatesGenerated -update")
			assert.Equal(t, 1, strings.Count(got, "PREFIX"), "only the header says PREFIX: every PREFIX in charts/_shared/helpers.tpl is followed by a dot and a template name")
		})
	}
}

// checkGenerated compares the generated file at path with want (fix: how to regenerate it) and returns what the
// file holds; with -update it writes want first.
func checkGenerated(t *testing.T, path, want, fix string) string {
	t.Helper()
	if *updateGolden {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, want, string(got), "%s: %s", path, fix)
	return string(got)
}

// TestPackagedChartsSelfContained: what `helm package` writes (chartutil.Save, the same code) holds the shared
// templates, needs no dependency, and renders exactly what the chart directory renders.
func TestPackagedChartsSelfContained(t *testing.T) {
	for _, name := range []string{"valkey", "valkey-sentinel"} {
		t.Run(name, func(t *testing.T) {
			dir := loadChart(t, name)
			archive, err := chartutil.Save(dir, t.TempDir())
			require.NoError(t, err)
			pkg, err := loader.Load(archive)
			require.NoError(t, err)
			assert.Empty(t, pkg.Metadata.Dependencies, "the charts install from a clone without helm dependency build")
			var shared bool
			for _, f := range pkg.Templates {
				shared = shared || f.Name == "templates/_shared.tpl"
			}
			assert.True(t, shared, "%s has templates/_shared.tpl", archive)
			vals, err := chartutil.ReadValues(nil)
			require.NoError(t, err)
			render := func(c *chart.Chart) map[string]string {
				opts := chartutil.ReleaseOptions{Name: "pkg", Namespace: testNamespace, Revision: 1, IsInstall: true}
				top, err := chartutil.ToRenderValues(c, vals, opts, chartutil.DefaultCapabilities)
				require.NoError(t, err)
				out, err := engine.Render(c, top)
				require.NoError(t, err)
				return out
			}
			assert.Equal(t, render(dir), render(pkg))
		})
	}
}
