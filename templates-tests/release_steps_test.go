package templatestests

// TestReleaseWorkflowStepsOnCleanRunner runs the release workflow's jobs here the way a GitHub runner would, in
// a clean environment, so a release tag cannot stop at a step that only works on a developer's machine.

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"helm.sh/helm/v3/pkg/chart/loader"
)

// fakeImageDigest stands for the digest docker/build-push-action would report for the pushed image.
var fakeImageDigest = "sha256:" + strings.Repeat("ab", 32)

// runnerShims are the commands that need a registry, GitHub's OIDC token or the GitHub API: on the simulated
// runner each is a dry run that checks its arguments (files it reads exist, references are by digest) and
// appends its command line to $SHIM_LOG. The helm shim passes every subcommand but push and registry to the
// real helm; its push prints the "Digest:" line helm prints (the sha256 of the package).
var runnerShims = map[string]string{
	"cosign": `#!/usr/bin/env bash
set -euo pipefail
echo "cosign $*" >>"$SHIM_LOG"
case $1 in
  login) cat >/dev/null ;;
  sign) [[ ${!#} == *@sha256:* ]] || { echo "cosign sign: ${!#} is not a digest reference" >&2; exit 1; } ;;
  attest)
    p=; prev=; for a in "$@"; do [[ $prev == --predicate ]] && p=$a; prev=$a; done
    [[ -s $p ]] || { echo "cosign attest: predicate $p missing" >&2; exit 1; }
    [[ ${!#} == *@sha256:* ]] || { echo "cosign attest: ${!#} is not a digest reference" >&2; exit 1; } ;;
  *) echo "cosign shim: unexpected $1" >&2; exit 1 ;;
esac
`,
	"syft": `#!/usr/bin/env bash
set -euo pipefail
echo "syft $*" >>"$SHIM_LOG"
[[ $1 == scan && $2 == dir:* && -d ${2#dir:} && $3 == -o && $4 == spdx-json=* ]] || { echo "syft shim: unexpected $*" >&2; exit 1; }
printf '{"spdxVersion":"SPDX-2.3","name":"%s"}\n' "${2#dir:}" >"${4#spdx-json=}"
`,
	"gh": `#!/usr/bin/env bash
set -euo pipefail
echo "gh $*" >>"$SHIM_LOG"
[[ $1 == release && $2 == create ]] || { echo "gh shim: unexpected $*" >&2; exit 1; }
[[ -n ${GH_TOKEN:-} ]] || { echo "gh: GH_TOKEN unset" >&2; exit 1; }
shift 3
while (($#)); do
  case $1 in --repo|--title) shift 2 ;; --notes-file) [[ -s $2 ]] || { echo "gh: notes $2 missing" >&2; exit 1; }; shift 2 ;;
    *) [[ -s $1 ]] || { echo "gh: asset $1 missing" >&2; exit 1; }; shift ;; esac
done
`,
	"helm": `#!/usr/bin/env bash
set -euo pipefail
case ${1:-} in
  registry) echo "helm $*" >>"$SHIM_LOG"; cat >/dev/null ;;
  push)
    echo "helm $*" >>"$SHIM_LOG"
    [[ -s $2 && $3 == oci://* ]] || { echo "helm push shim: unexpected $*" >&2; exit 1; }
    n=$(basename "$2" .tgz)
    echo "Pushed: ${3#oci://}/${n%-*}:${n##*-}"
    echo "Digest: sha256:$(sha256sum "$2" | cut -d' ' -f1)" ;;
  *) exec "$REAL_HELM" "$@" ;;
esac
`,
}

// TestReleaseWorkflowStepsOnCleanRunner runs every job of .github/workflows/release.yaml in order (check,
// image, charts, release), each `run:` step with bash -e -o pipefail as the runner does, in an environment
// like a fresh ubuntu runner's and unlike this machine's: a new HOME and workspace (the checked-out tree, copied),
// no GOPATH/bin, a PATH without valkey or redis programs, VALKEY_HA_ENGINES an empty directory, CI=true,
// GITHUB_ACTIONS=true. The `uses:` steps are simulated by what they leave behind (checkout: the tree;
// setup-go/setup-helm: go/helm on PATH; cosign-installer/download-syft: their dry-run shims; build-push-action:
// a digest output; sbom-action: an SPDX file; upload/download-artifact: copies), and the commands that need a
// registry, OIDC or the GitHub API (cosign, syft scan of a pushed artifact, helm push/registry login, gh
// release) are recording dry runs. Not run: the image build itself (BuildKit and QEMU; the Dockerfile's
// cross-compile lines are checked by TestReleaseWorkflow). The module cache and build cache are this
// machine's, read-only for modules with GOPROXY=off: the runner downloads the same go.sum-pinned modules.
// Skipped under GITHUB_ACTIONS=true, where it is the run itself.
func TestReleaseWorkflowStepsOnCleanRunner(t *testing.T) {
	skipProcesses(t, "the release workflow's steps (bash, git, go build)")
	if os.Getenv("GITHUB_ACTIONS") == "true" {
		t.Skip("inside a (simulated) workflow run: this test is what runs it")
	}
	realHelm := needBinary(t, "helm")
	for _, b := range []string{"bash", "git", "sha256sum", "awk"} {
		needBinary(t, b)
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	w := readWorkflow(t)
	version := chartVersion(t, "valkey")

	tmp := t.TempDir()
	dirs := map[string]string{}
	for _, d := range []string{"home", "engines", "sysbin", "shims", "artifacts", "tools-go", "tools-helm", "tmp"} {
		dirs[d] = filepath.Join(tmp, d)
		require.NoError(t, os.MkdirAll(dirs[d], 0o755))
	}
	shimLog := filepath.Join(tmp, "shims.log")
	for name, body := range runnerShims {
		require.NoError(t, os.WriteFile(filepath.Join(dirs["shims"], name), []byte(body), 0o755))
	}
	require.NoError(t, os.Symlink(filepath.Join(runtime.GOROOT(), "bin", "go"), filepath.Join(dirs["tools-go"], "go")))
	require.NoError(t, os.Symlink(filepath.Join(runtime.GOROOT(), "bin", "gofmt"), filepath.Join(dirs["tools-go"], "gofmt")))
	require.NoError(t, os.Symlink(filepath.Join(dirs["shims"], "helm"), filepath.Join(dirs["tools-helm"], "helm")))
	// the system's programs without the engines (a runner has none) and without anything of GOPATH/bin
	engine := regexp.MustCompile(`^(valkey|redis)-`)
	for _, d := range []string{"/usr/local/bin", "/usr/bin", "/bin"} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			dst := filepath.Join(dirs["sysbin"], e.Name())
			if engine.MatchString(e.Name()) || e.Name() == "helm" || e.Name() == "go" {
				continue
			}
			if _, err := os.Lstat(dst); err == nil {
				continue
			}
			require.NoError(t, os.Symlink(filepath.Join(d, e.Name()), dst))
		}
	}
	goEnv := func(k string) string {
		out, err := exec.Command("go", "env", k).Output()
		require.NoError(t, err)
		return strings.TrimSpace(string(out))
	}
	sha, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	require.NoError(t, err)
	base := map[string]string{
		"HOME": dirs["home"], "CI": "true", "GITHUB_ACTIONS": "true", "RUNNER_TEMP": dirs["tmp"], "TMPDIR": dirs["tmp"],
		"GITHUB_REF": "refs/tags/v" + version, "GITHUB_REF_NAME": "v" + version, "GITHUB_REF_TYPE": "tag",
		"GITHUB_REPOSITORY": "valkey-ha/valkey-ha", "GITHUB_SHA": strings.TrimSpace(string(sha)),
		"VALKEY_HA_ENGINES": dirs["engines"], "SHIM_LOG": shimLog, "REAL_HELM": realHelm,
		"GOCACHE": goEnv("GOCACHE"), "GOMODCACHE": goEnv("GOMODCACHE"), "GOPROXY": "off", "GOFLAGS": "-mod=readonly",
		"GOTOOLCHAIN": "local", "GOPATH": filepath.Join(dirs["home"], "go"), "LANG": "C.UTF-8",
	}
	for k, v := range w.Env {
		base[k] = v
	}

	ctx := map[string]string{ // ${{ ... }} values that are not outputs or env
		"github.actor": "release-bot", "github.sha": base["GITHUB_SHA"], "github.ref": base["GITHUB_REF"],
		"secrets.GITHUB_TOKEN": "dry-run-token",
	}
	for k, v := range w.Env {
		ctx["env."+k] = v
	}
	expr := regexp.MustCompile(`\$\{\{\s*([^}]+?)\s*\}\}`)
	eval := func(s string) string {
		return expr.ReplaceAllStringFunc(s, func(m string) string {
			k := expr.FindStringSubmatch(m)[1]
			v, ok := ctx[k]
			if !ok {
				t.Fatalf("expression %s: the simulated runner does not know %s (add it to the test)", m, k)
			}
			return v
		})
	}

	order := []string{"check", "image", "charts", "release"}
	require.ElementsMatch(t, order, keys(w.Jobs), "the jobs the test runs")
	for _, name := range order {
		job := w.Jobs[name]
		ws := filepath.Join(tmp, "ws-"+name)
		require.NoError(t, os.MkdirAll(ws, 0o755))
		path := []string{dirs["sysbin"]}
		addPath := func(d string) { path = append([]string{d}, path...) }
		addPath(dirs["shims"] + "-gh") // gh is preinstalled on GitHub's runners
		require.NoError(t, os.MkdirAll(dirs["shims"]+"-gh", 0o755))
		_ = os.Symlink(filepath.Join(dirs["shims"], "gh"), filepath.Join(dirs["shims"]+"-gh", "gh"))
		jobEnv := map[string]string{}
		for k, v := range job.Env {
			ctx["env."+k] = eval(v)
			jobEnv[k] = ctx["env."+k]
		}
		for i, st := range job.Steps {
			label := fmt.Sprintf("%s step %d (%s%s)", name, i+1, st.Name, st.Uses)
			if st.Uses != "" {
				action := st.Uses[:strings.Index(st.Uses, "@")]
				with := map[string]string{}
				for k, v := range st.With {
					with[k] = eval(fmt.Sprint(v))
				}
				switch action {
				case "actions/checkout":
					copyTree(t, root, ws)
				case "actions/setup-go":
					addPath(dirs["tools-go"])
				case "azure/setup-helm":
					addPath(dirs["tools-helm"])
				case "sigstore/cosign-installer", "anchore/sbom-action/download-syft":
					d := filepath.Join(tmp, name+"-tool-"+filepath.Base(action))
					require.NoError(t, os.MkdirAll(d, 0o755))
					prog := map[string]string{"sigstore/cosign-installer": "cosign", "anchore/sbom-action/download-syft": "syft"}[action]
					require.NoError(t, os.Symlink(filepath.Join(dirs["shims"], prog), filepath.Join(d, prog)))
					addPath(d)
				case "docker/setup-qemu-action", "docker/setup-buildx-action", "docker/login-action":
					// a daemon and a registry: nothing a later run step uses
				case "docker/build-push-action":
					ctx["steps."+st.ID+".outputs.digest"] = fakeImageDigest
				case "anchore/sbom-action":
					require.Contains(t, with["image"], "@sha256:", "%s: the SBOM is of the pushed digest", label)
					require.NoError(t, os.WriteFile(filepath.Join(ws, with["output-file"]), []byte(`{"spdxVersion":"SPDX-2.3"}`), 0o644))
				case "actions/upload-artifact":
					copyTree(t, filepath.Join(ws, with["path"]), filepath.Join(dirs["artifacts"], with["name"]))
				case "actions/download-artifact":
					require.Equal(t, "true", with["merge-multiple"])
					copyTree(t, dirs["artifacts"], filepath.Join(ws, with["path"]), true)
				default:
					t.Fatalf("%s: the simulated runner does not know action %s (add it to the test)", label, action)
				}
				continue
			}
			require.NotEmpty(t, st.Run, label)
			out := filepath.Join(tmp, fmt.Sprintf("%s-%d.out", name, i))
			require.NoError(t, os.WriteFile(out, nil, 0o644))
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range jobEnv {
				env[k] = v
			}
			for k, v := range st.Env {
				env[k] = eval(v)
			}
			env["PATH"] = strings.Join(path, ":")
			env["GITHUB_OUTPUT"], env["GITHUB_WORKSPACE"] = out, ws
			cmd := exec.Command(filepath.Join(dirs["sysbin"], "bash"), "--noprofile", "--norc", "-e", "-o", "pipefail", "-c", eval(st.Run))
			cmd.Dir = ws
			for k, v := range env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			b, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s failed on the clean runner:\n%s", label, b)
			t.Logf("%s: ok", label)
			if name == "check" && strings.Contains(st.Run, "go test") {
				assert.Regexp(t, `(?m)^ok\s+\S+/templates-tests\s`, string(b), "the render tests ran and passed")
				assert.NotContains(t, string(b), "FAIL")
			}
			for k, v := range readOutputs(t, out) {
				ctx["steps."+st.ID+".outputs."+k] = v
			}
		}
		for k, v := range job.Outputs {
			ctx["needs."+name+".outputs."+k] = eval(v)
		}
	}

	assert.Equal(t, version, ctx["needs.check.outputs.version"], "the check job's version output is the charts'")
	assert.Equal(t, fakeImageDigest, ctx["needs.image.outputs.digest"])
	assets := filepath.Join(tmp, "ws-release", "assets")
	for _, c := range []string{"valkey", "valkey-sentinel"} {
		ch, err := loader.Load(filepath.Join(assets, c+"-"+version+".tgz"))
		require.NoError(t, err, "%s package in the release assets", c)
		img := ch.Values["controller"].(map[string]any)["image"].(map[string]any)
		assert.Equal(t, fakeImageDigest, img["digest"], "%s: the published chart pulls the image by its digest", c)
		assert.FileExists(t, filepath.Join(assets, c+"-"+version+".spdx.json"))
	}
	digests, err := os.ReadFile(filepath.Join(assets, "digests.txt"))
	require.NoError(t, err)
	assert.Len(t, strings.Fields(string(digests)), 3, "two charts and the image, each by digest:\n%s", digests)
	log, err := os.ReadFile(shimLog)
	require.NoError(t, err)
	calls := string(log)
	for _, want := range []string{
		"cosign sign --yes " + w.Env["IMAGE"] + "@" + fakeImageDigest,
		"cosign attest --yes --type spdxjson --predicate valkey-sentinel-ctl-" + version + ".spdx.json " + w.Env["IMAGE"] + "@" + fakeImageDigest,
		"helm push dist/valkey-" + version + ".tgz " + w.Env["CHARTS"],
		"helm push dist/valkey-sentinel-" + version + ".tgz " + w.Env["CHARTS"],
		"gh release create v" + version,
	} {
		assert.Contains(t, calls, want)
	}
	assert.Equal(t, 2, strings.Count(calls, "cosign sign --yes "+strings.TrimPrefix(w.Env["CHARTS"], "oci://")), "both charts signed:\n%s", calls)
}

func chartVersion(t *testing.T, c string) string {
	t.Helper()
	ch, err := loader.Load(chartPath(c))
	require.NoError(t, err)
	return ch.Metadata.Version
}

// readOutputs parses a $GITHUB_OUTPUT file of name=value lines.
func readOutputs(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			out[k] = v
		}
	}
	return out
}

// copyTree copies src into dst: a git checkout's files (tracked and untracked but not ignored, as they are in
// the working tree) when src is the repository, a file or a directory's files otherwise. flat copies the files
// of src's subdirectories into dst itself (download-artifact's merge-multiple).
func copyTree(t *testing.T, src, dst string, flat ...bool) {
	t.Helper()
	var files []string
	if _, err := os.Stat(filepath.Join(src, ".git")); err == nil {
		out, err := exec.Command("git", "-C", src, "ls-files", "-z", "-c", "-o", "--exclude-standard").Output()
		require.NoError(t, err)
		for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
			files = append(files, f)
		}
	} else if fi, err := os.Stat(src); err == nil && !fi.IsDir() {
		require.NoError(t, os.MkdirAll(dst, 0o755))
		copyFile(t, src, filepath.Join(dst, filepath.Base(src)))
		return
	} else {
		require.NoError(t, filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() {
				rel, _ := filepath.Rel(src, p)
				files = append(files, rel)
			}
			return err
		}))
	}
	for _, f := range files {
		to := filepath.Join(dst, f)
		if len(flat) > 0 && flat[0] {
			to = filepath.Join(dst, filepath.Base(f))
		}
		if _, err := os.Stat(filepath.Join(src, f)); err != nil {
			continue // deleted in the working tree
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(to), 0o755))
		copyFile(t, filepath.Join(src, f), to)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	fi, err := os.Stat(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, b, fi.Mode().Perm()))
}
