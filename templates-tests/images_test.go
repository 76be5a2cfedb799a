package templatestests

// Images a real cluster can pull (issue 15): the charts default to the published controller image, every image
// of both charts follows global.imageRegistry, its own registry and digest, Chart.yaml's Artifact Hub list is
// exactly what the charts run, and hack/images.sh builds the local image under that same default reference.

import (
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

const (
	defaultCtlImage = "ghcr.io/valkey-ha/valkey-sentinel-ctl:0.1.0"
	testDigest      = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// allValues turns on every optional pod of a chart (the exporter), so every image is rendered.
var allValues = map[string]string{"valkey": "metrics: {enabled: true}\n", "valkey-sentinel": "metrics: {enabled: true}\n"}

// imagesOf returns container name (Kind/object/container) -> image of every pod a render holds: workloads,
// the credentials Job and the helm test pods.
func imagesOf(t testing.TB, files map[string]string) map[string]string {
	t.Helper()
	out := map[string]string{}
	objs := decode(t, files)
	specs := objs.podSpecs()
	for _, o := range objs.ofKind("Job") {
		j := o.(*batchv1.Job)
		specs["Job/credentials"] = &j.Spec.Template.Spec // its name carries a hash of the image
	}
	for id, spec := range specs {
		for _, c := range allContainers(spec) {
			out[id+"/"+c.Name] = c.Image
		}
	}
	return out
}

func TestImageDefaults(t *testing.T) {
	want := map[string]map[string]string{
		"valkey": {
			"valkey": "valkey/valkey:9.1", "metrics": "oliver006/redis_exporter:v1.67.0", "install-ctl": defaultCtlImage,
			"controller": defaultCtlImage, "credentials": defaultCtlImage, "test": defaultCtlImage,
			"dns-resolv": defaultCtlImage, "dns-cache": defaultCtlImage,
		},
		"valkey-sentinel": {
			"sentinel": "valkey/valkey:9.1", "metrics": "oliver006/redis_exporter:v1.67.0", "controller": defaultCtlImage,
			"credentials": defaultCtlImage, "test": defaultCtlImage, "dns-resolv": defaultCtlImage, "dns-cache": defaultCtlImage,
		},
	}
	for chart, byContainer := range want {
		imgs := imagesOf(t, mustRender(t, chart, allValues[chart]))
		seen := map[string]bool{}
		for id, img := range imgs {
			name := id[strings.LastIndex(id, "/")+1:]
			if w, ok := byContainer[name]; ok {
				assert.Equal(t, w, img, "%s %s", chart, id)
				seen[name] = true
			} else if !strings.HasPrefix(name, "config") && name != "init-config" {
				assert.Fail(t, "unexpected container", "%s %s runs %s", chart, id, img)
			}
		}
		for name := range byContainer {
			assert.True(t, seen[name], "%s: no container %s rendered", chart, name)
		}
	}
}

// TestImageRegistryAndDigest: global.imageRegistry moves every image of a chart (a mirror), a per-image registry
// moves that image only (global wins), a digest pins the image (repository:tag@digest).
func TestImageRegistryAndDigest(t *testing.T) {
	for _, chart := range []string{"valkey", "valkey-sentinel"} {
		def := imagesOf(t, mustRender(t, chart, allValues[chart]))
		mirror := imagesOf(t, mustRender(t, chart, allValues[chart]+"global: {imageRegistry: registry.example.com:5000/mirror/}\n"))
		for id, img := range def {
			path := strings.TrimPrefix(img, "ghcr.io/")
			assert.Equal(t, "registry.example.com:5000/mirror/"+path, mirror[id], "%s %s: global.imageRegistry", chart, id)
		}

		own := imagesOf(t, mustRender(t, chart, "image: {registry: registry.example.com}\nmetrics: {enabled: true, image: {registry: quay.example.com}}\ncontroller: {image: {registry: ctl.example.com}}\n"))
		both := imagesOf(t, mustRender(t, chart, allValues[chart]+"global: {imageRegistry: mirror.example.com}\ncontroller: {image: {registry: ctl.example.com}}\n"))
		pinned := imagesOf(t, mustRender(t, chart, "image: {digest: "+testDigest+"}\nmetrics: {enabled: true, image: {digest: "+testDigest+"}}\ncontroller: {image: {digest: "+testDigest+"}}\n"))
		for id, img := range def {
			name := id[strings.LastIndex(id, "/")+1:]
			path := strings.TrimPrefix(img, "ghcr.io/")
			switch {
			case name == "metrics":
				assert.Equal(t, "quay.example.com/"+path, own[id], id)
			case strings.Contains(img, "valkey-sentinel-ctl"):
				assert.Equal(t, "ctl.example.com/"+path, own[id], id)
			default:
				assert.Equal(t, "registry.example.com/"+path, own[id], id)
			}
			assert.Equal(t, "mirror.example.com/"+path, both[id], "%s %s: global.imageRegistry wins over an image's registry", chart, id)
			assert.Equal(t, img+"@"+testDigest, pinned[id], "%s %s: digest", chart, id)
		}
	}
}

// TestArtifactHubImagesAreTheDefaults: artifacthub.io/images in each Chart.yaml lists exactly the images the
// chart runs with its defaults (exporter on), so Artifact Hub scans what users pull.
func TestArtifactHubImagesAreTheDefaults(t *testing.T) {
	for _, chart := range []string{"valkey", "valkey-sentinel"} {
		c, err := loader.Load(chartPath(chart))
		require.NoError(t, err)
		var listed []struct{ Name, Image string }
		require.NoError(t, yaml.Unmarshal([]byte(c.Metadata.Annotations["artifacthub.io/images"]), &listed), chart)
		var got, want []string
		for _, l := range listed {
			got = append(got, l.Image)
		}
		uniq := map[string]bool{}
		for _, img := range imagesOf(t, mustRender(t, chart, allValues[chart])) {
			if !uniq[img] {
				uniq[img] = true
				want = append(want, img)
			}
		}
		sort.Strings(got)
		sort.Strings(want)
		assert.Equal(t, want, got, "%s: artifacthub.io/images", chart)
		for _, k := range []string{"artifacthub.io/links", "artifacthub.io/changes", "artifacthub.io/category"} {
			assert.NotEmpty(t, c.Metadata.Annotations[k], "%s: %s", chart, k)
		}
		assert.NotEmpty(t, c.Metadata.Icon, chart)
		assert.NotEmpty(t, c.Metadata.Sources, chart)
		assert.Equal(t, c.Metadata.AppVersion, c.Metadata.Version, "%s: one version for chart and image until they diverge", chart)
	}
}

// TestKubeVersion: both charts declare the Kubernetes versions they work on: 1.27 and later (the e2e suite runs
// 1.34), not 1.26.
func TestKubeVersion(t *testing.T) {
	for _, chart := range []string{"valkey", "valkey-sentinel"} {
		c, err := loader.Load(chartPath(chart))
		require.NoError(t, err)
		require.NotEmpty(t, c.Metadata.KubeVersion, chart)
		for v, ok := range map[string]bool{"1.26.9": false, "1.27.0": true, "1.34.4": true, "1.35.0-gke.1": true} {
			assert.Equal(t, ok, chartutil.IsCompatibleRange(c.Metadata.KubeVersion, v), "%s kubeVersion %q on %s", chart, c.Metadata.KubeVersion, v)
		}
	}
}

// TestHackImageIsTheChartDefault: hack/ctl-image.sh (the name hack/images.sh builds the local controller image
// under) prints the controller image both charts render by default, so the demo and the e2e suite need no
// image override.
func TestHackImageIsTheChartDefault(t *testing.T) {
	skipProcesses(t, "hack/ctl-image.sh (bash)")
	for _, chart := range []string{"valkey", "valkey-sentinel"} {
		out, err := exec.Command("bash", filepath.Join("..", "hack", "ctl-image.sh"), chart).Output()
		require.NoError(t, err)
		assert.Equal(t, defaultCtlImage, strings.TrimSpace(string(out)), chart)
	}
	assert.Equal(t, defaultCtlImage, imagesOf(t, mustRender(t, "valkey", ""))["Deployment/"+valkeyF+"-controller/controller"])
}
