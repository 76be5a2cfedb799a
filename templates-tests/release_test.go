package templatestests

// The release pipeline (.github/workflows/release.yaml) cannot run here (no registry, no GitHub OIDC); this
// checks the jobs and steps the charts rely on: it publishes the image the charts pull by default, for both
// architectures, signed, with SBOMs, and both charts with that image's digest pinned, signed. `make lint` also
// runs actionlint on the file.

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v3/pkg/chart/loader"
)

type workflowStep struct {
	Name string            `json:"name"`
	ID   string            `json:"id"`
	Uses string            `json:"uses"`
	Run  string            `json:"run"`
	With map[string]any    `json:"with"`
	Env  map[string]string `json:"env"`
}

type workflowJob struct {
	Needs       any               `json:"needs"`
	Permissions map[string]string `json:"permissions"`
	Env         map[string]string `json:"env"`
	Outputs     map[string]string `json:"outputs"`
	Steps       []workflowStep    `json:"steps"`
}

type workflow struct {
	On          map[string]any         `json:"on"`
	True        map[string]any         `json:"true"` // YAML 1.1 reads the key `on` as true
	Permissions map[string]string      `json:"permissions"`
	Env         map[string]string      `json:"env"`
	Jobs        map[string]workflowJob `json:"jobs"`
}

func readWorkflow(t *testing.T) workflow {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", ".github", "workflows", "release.yaml"))
	require.NoError(t, err)
	var w workflow
	require.NoError(t, yaml.Unmarshal(b, &w))
	if w.On == nil {
		w.On = w.True
	}
	return w
}

// step returns the first step of job that uses action (a prefix such as docker/build-push-action@) or whose
// run script matches re.
func (j workflowJob) step(uses string, re *regexp.Regexp) (workflowStep, bool) {
	for _, s := range j.Steps {
		if (uses != "" && strings.HasPrefix(s.Uses, uses)) || (re != nil && re.MatchString(s.Run)) {
			return s, true
		}
	}
	return workflowStep{}, false
}

func TestReleaseWorkflow(t *testing.T) {
	w := readWorkflow(t)
	push, _ := w.On["push"].(map[string]any)
	require.NotNil(t, push, "runs on push (of a tag)")
	assert.Equal(t, []any{"v*.*.*"}, push["tags"])
	assert.Empty(t, w.Permissions, "no permission by default; each job asks for its own")

	// the image is the one the charts pull by default
	ctl := strings.TrimSuffix(defaultCtlImage, ":0.1.0")
	assert.Equal(t, ctl, w.Env["IMAGE"], "the pipeline pushes the charts' default controller image")
	assert.True(t, strings.HasPrefix(ctl, w.Env["REGISTRY"]+"/"))

	img, ok := w.Jobs["image"]
	require.True(t, ok, "job image")
	assert.Equal(t, "write", img.Permissions["id-token"], "keyless signing needs the OIDC token")
	assert.Equal(t, "write", img.Permissions["packages"])
	build, ok := img.step("docker/build-push-action@", nil)
	require.True(t, ok, "docker/build-push-action")
	assert.Equal(t, "Dockerfile", build.With["file"])
	assert.ElementsMatch(t, []string{"linux/amd64", "linux/arm64"}, strings.Split(build.With["platforms"].(string), ","), "multi-arch")
	assert.Equal(t, true, build.With["push"])
	assert.Equal(t, true, build.With["sbom"], "BuildKit SBOM attestation")
	assert.Contains(t, build.With["tags"], "${{ env.IMAGE }}:${{ env.VERSION }}")
	assert.Contains(t, build.With["build-args"], "VERSION=")
	_, ok = img.step("docker/setup-qemu-action@", nil)
	assert.True(t, ok, "QEMU for the foreign architecture")
	sign, ok := img.step("", regexp.MustCompile(`cosign sign --yes "\$IMAGE@\$DIGEST"`))
	require.True(t, ok, "cosign signs the pushed digest (not a tag)")
	assert.Equal(t, "${{ steps.build.outputs.digest }}", sign.Env["DIGEST"])
	_, ok = img.step("anchore/sbom-action@", nil)
	assert.True(t, ok, "an SPDX SBOM of the image")
	_, ok = img.step("", regexp.MustCompile(`cosign attest --yes --type spdxjson .*"\$IMAGE@\$DIGEST"`))
	assert.True(t, ok, "the SBOM attested to the image digest")

	charts, ok := w.Jobs["charts"]
	require.True(t, ok, "job charts")
	assert.ElementsMatch(t, []any{"check", "image"}, charts.Needs)
	assert.Equal(t, "write", charts.Permissions["id-token"])
	assert.Equal(t, "${{ needs.image.outputs.digest }}", charts.Env["DIGEST"])
	_, ok = charts.step("", regexp.MustCompile(`hack/pin-digest\.sh "charts/\$c/values\.yaml" "\$DIGEST"`))
	assert.True(t, ok, "the published charts pull the signed image by digest")
	_, ok = charts.step("", regexp.MustCompile(`for c in valkey valkey-sentinel; do[\s\S]*helm package "charts/\$c"`))
	assert.True(t, ok, "both charts packaged")
	pushStep, ok := charts.step("", regexp.MustCompile(`helm push .* "\$CHARTS"`))
	require.True(t, ok, "charts pushed to the OCI registry")
	assert.True(t, strings.HasPrefix(w.Env["CHARTS"], "oci://"+w.Env["REGISTRY"]+"/"))
	for _, want := range []string{`cosign sign --yes "$ref"`, `cosign attest --yes --type spdxjson`, `syft scan "dir:charts/$c"`} {
		assert.Contains(t, pushStep.Run, want)
	}
	rel, ok := w.Jobs["release"]
	require.True(t, ok, "job release")
	assert.Equal(t, "write", rel.Permissions["contents"])
	_, ok = rel.step("", regexp.MustCompile(`gh release create`))
	assert.True(t, ok)

	// what the steps rely on in the tree: the digest key in both values files, the version lines the check job
	// greps, a Dockerfile that cross-compiles for the target architecture
	check := w.Jobs["check"]
	v, ok := check.step("", regexp.MustCompile(`grep -qx "version: \$v"`))
	require.True(t, ok)
	assert.Contains(t, v.Run, `grep -qx "appVersion: \"$v\""`)
	for _, c := range []string{"valkey", "valkey-sentinel"} {
		ch, err := loader.Load(chartPath(c))
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(chartPath(c), "Chart.yaml"))
		require.NoError(t, err)
		assert.Regexp(t, "(?m)^version: "+regexp.QuoteMeta(ch.Metadata.Version)+"$", string(b), c)
		assert.Regexp(t, `(?m)^appVersion: "`+regexp.QuoteMeta(ch.Metadata.AppVersion)+`"$`, string(b), c)
		ctlValues, _ := ch.Values["controller"].(map[string]any)["image"].(map[string]any)
		assert.Contains(t, ctlValues, "digest", "%s: controller.image.digest, which the pipeline pins", c)
	}
	df, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	require.NoError(t, err)
	for _, want := range []string{"FROM --platform=$BUILDPLATFORM", "ARG TARGETARCH", "GOARCH=$TARGETARCH", "ARG VERSION", "internal/cli.Version=${VERSION}", "USER 65532:65532"} {
		assert.Contains(t, string(df), want)
	}
}

// TestChangelogCoversTheChartVersions: both charts carry one semantic version X.Y.Z as version and appVersion
// (the release tag vX.Y.Z must equal them), and CHANGELOG.md has an entry "## [X.Y.Z]" for it, so a release
// cannot go out without saying what changed and what an upgrade needs; the release workflow's check job
// greps the same heading.
func TestChangelogCoversTheChartVersions(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "CHANGELOG.md"))
	require.NoError(t, err)
	semver := regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)
	versions := map[string]bool{}
	for _, c := range []string{"valkey", "valkey-sentinel"} {
		ch, err := loader.Load(chartPath(c))
		require.NoError(t, err)
		assert.Regexp(t, semver, ch.Metadata.Version, "%s: version is semantic", c)
		assert.Equal(t, ch.Metadata.Version, ch.Metadata.AppVersion, "%s: appVersion (the controller image tag) is the chart version", c)
		versions[ch.Metadata.Version], versions[ch.Metadata.AppVersion] = true, true
	}
	assert.Len(t, versions, 1, "both charts and the controller share one version: %v", versions)
	for v := range versions {
		assert.Regexp(t, `(?m)^## \[`+regexp.QuoteMeta(v)+`\]`, string(b), "CHANGELOG.md has no entry for %s", v)
	}
	w := readWorkflow(t)
	step, ok := w.Jobs["check"].step("", regexp.MustCompile(`grep -q "\^## \\\[\$v\\\]" CHANGELOG.md`))
	require.True(t, ok, "the release workflow refuses a tag without a CHANGELOG entry")
	assert.Contains(t, step.Run, "CHANGELOG.md")
}
