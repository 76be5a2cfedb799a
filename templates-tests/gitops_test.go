package templatestests

// GitOps safety (issue 15): `helm template` (Argo CD, Flux with post-render, CI diffs) must render exactly what
// `helm install` applies. Nothing rendered depends on render-time lookup or on randomness: passwords are
// generated at run time by the credentials Job, Secrets the values name are read at run time, and the lookups
// that remain only refuse an impossible upgrade.

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// gitopsValues are value sets that exercise every credential path: generated system passwords,
// auth.existingSecret, generated and referenced customer passwords, a rotation with a grace deadline, no
// controller, metrics, TLS.
var gitopsValues = map[string][]string{
	"valkey": {
		"",
		usersValues + "metrics: {enabled: true, podMonitor: {enabled: true}}\n",
		"auth: {existingSecret: sys}\nusers: [{name: ext, passwordSecret: {name: mine, key: pw}}, {name: app, keys: [\"*\"], rotation: {generation: 3, previousValidUntil: \"" +
			time.Now().Add(time.Hour).UTC().Format(time.RFC3339) + "\"}}]\n",
		"controller: {enabled: false}\nupdateStrategy: RollingUpdate\nusers: [{name: app, keys: [\"*\"]}]\n",
		"tls: {enabled: true, existingSecret: tls, certManager: {enabled: true, issuerRef: {name: ca}}}\npersistence: {enabled: true}\n",
	},
	"valkey-sentinel": {
		"",
		"metrics: {enabled: true, podMonitor: {enabled: true}}\n",
	},
}

// TestOfflineRendersAreIdentical: two renders of the same values are byte-identical, for every value set of
// both charts (before, every render generated new system passwords: a GitOps sync would have rotated
// _operator and friends each time).
func TestOfflineRendersAreIdentical(t *testing.T) {
	for chart, sets := range gitopsValues {
		for i, v := range sets {
			first := mustRender(t, chart, v, renderOpts{withNotes: true})
			second := mustRender(t, chart, v, renderOpts{withNotes: true})
			assert.Equal(t, first, second, "%s values #%d: two offline renders differ", chart, i)
		}
	}
}

// TestRenderIgnoresClusterSecrets: a render that sees a cluster holding every Secret the release uses
// (generated passwords, F-acl, auth.existingSecret, users[].passwordSecret, rotation state mid-grace) renders
// the same bytes as one that sees an empty cluster: no manifest depends on a Secret's existence or content.
func TestRenderIgnoresClusterSecrets(t *testing.T) {
	for chart, sets := range gitopsValues {
		for i, v := range sets {
			offline := mustRender(t, chart, v, renderOpts{withNotes: true})
			var held []runtime.Object
			if chart == "valkey" {
				seed := []*corev1.Secret{
					secretOf("sys", map[string]string{"_operator": "o-0123456789", "_replication": "r-0123456789", "_probe": "p-0123456789", "_exporter": "e-0123456789"}),
					secretOf("mine", map[string]string{"pw": "mine-0123456789"}),
					userSecret("app", "old-0123456789", 1, ""),
				}
				objs, _ := runCredentials(t, decode(t, offline), time.Now(), seed...)
				for _, s := range objs.ofKind("Secret") {
					held = append(held, asExisting(s.(*corev1.Secret)))
				}
				require.NotEmpty(t, runtimeSecrets(objs), "the cluster holds the run-time Secrets")
			} else {
				held = append(held, asExisting(secretOf(sentinelRel+"-auth", map[string]string{"password": "s-0123456789"})))
			}
			online := mustRender(t, chart, v, renderOpts{withNotes: true, existing: held})
			assert.Equal(t, offline, online, "%s values #%d: a cluster's Secrets changed the render", chart, i)
		}
	}
}

// lookupExempt are the templates still allowed a Secret lookup, with why. The Sentinel chart's own password
// Secret is refused today (auth.enabled is not supported yet) and is being rewritten with Sentinel auth.
var lookupExempt = map[string]string{
	"valkey-sentinel/templates/secret-auth.yaml": "Sentinel auth (rendered only with auth.enabled, refused today); rewritten with it",
}

var (
	defineRE = regexp.MustCompile(`{{-?\s*define\s+"([^"]+)"`)
	lookupRE = regexp.MustCompile(`\blookup\s+"([^"]*)"\s+"([^"]+)"`)
)

// TestLookupOnlyValidates: every remaining `lookup` in both charts sits in a validate* helper (it can refuse an
// upgrade the API server would refuse less clearly, never change a rendered byte; TestRenderIgnoresClusterSecrets
// proves the bytes) and none reads a Secret.
func TestLookupOnlyValidates(t *testing.T) {
	var found int
	for _, chart := range []string{"valkey", "valkey-sentinel"} {
		err := filepath.Walk(filepath.Join(chartPath(chart), "templates"), func(path string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel := chart + "/templates/" + strings.TrimPrefix(filepath.ToSlash(path), filepath.ToSlash(filepath.Join(chartPath(chart), "templates"))+"/")
			define := ""
			for n, line := range strings.Split(string(b), "\n") {
				if m := defineRE.FindStringSubmatch(line); m != nil {
					define = m[1]
				}
				m := lookupRE.FindStringSubmatch(line)
				if m == nil {
					continue
				}
				if _, ok := lookupExempt[rel]; ok {
					continue
				}
				found++
				where := rel + ":" + strconv.Itoa(n+1)
				assert.NotEqual(t, "Secret", m[2], "%s: a Secret lookup (read Secrets at run time instead)", where)
				name := define[strings.Index(define, ".")+1:]
				assert.True(t, strings.HasPrefix(name, "validate"), "%s: lookup %s outside a validate* helper (in %q)", where, m[2], define)
			}
			return nil
		})
		require.NoError(t, err)
	}
	assert.Equal(t, 5, found, "the validation lookups: StatefulSets (claim size and class; claim labels and annotations) and the descriptor (valkey), the StatefulSet (claim labels and annotations) and the ServiceAccount (valkey-sentinel)")
}

func secretOf(name string, data map[string]string) *corev1.Secret {
	d := map[string][]byte{}
	for k, v := range data {
		d[k] = []byte(v)
	}
	return &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace}, Data: d}
}

func credentialsJob(t testing.TB, objs objects) *batchv1.Job {
	t.Helper()
	jobs := objs.ofKind("Job")
	require.Len(t, jobs, 1, "one credentials Job")
	return jobs[0].(*batchv1.Job)
}

// TestCredentialsJob: the Job runs `valkey-sentinel-ctl credentials` from the controller image on the
// rendered spec, restricted like every pod of the chart, with or without the controller; its name (a Job's pod
// template is immutable) changes with the spec, the image and the Helm revision and with nothing else, and fits
// the 63 characters of the job-name label at the longest fullname.
func TestCredentialsJob(t *testing.T) {
	objs := decode(t, mustRender(t, "valkey", usersValues))
	job := credentialsJob(t, objs)
	spec := job.Spec.Template.Spec
	c := container(t, &spec, "credentials")
	assert.Equal(t, container(t, &objs.statefulSets()[0].Spec.Template.Spec, "install-ctl").Image, c.Image, "the controller image")
	assert.Equal(t, []string{"/valkey-sentinel-ctl"}, c.Command)
	assert.Equal(t, []string{"credentials", "--namespace", testNamespace, "--spec", "/etc/valkey-ha/credentials/spec.json", "--timeout", "25m"}, c.Args)
	assert.Equal(t, valkeyF+"-acl-spec", volume(t, &spec, "spec").Secret.SecretName)
	assert.Equal(t, corev1.RestartPolicyNever, spec.RestartPolicy)
	require.NotNil(t, c.SecurityContext)
	assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
	assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	assert.Equal(t, c.Resources.Limits, c.Resources.Requests)
	assert.Equal(t, "credentials", job.Spec.Template.Labels["app.kubernetes.io/component"])
	assert.NotContains(t, job.Spec.Template.Labels, "valkey.io/instance", "not a data pod: no NetworkPolicy or controller selects it")

	name := func(values string, o renderOpts) string {
		return credentialsJob(t, decode(t, mustRender(t, "valkey", values, o))).Name
	}
	base := name(usersValues, renderOpts{})
	assert.Regexp(t, "^"+valkeyF+"-credentials-[0-9a-f]{8}$", base)
	assert.Equal(t, base, name(usersValues, renderOpts{}), "same values, same Job")
	assert.Equal(t, base, name(usersValues+"replicas: 4\nmaxmemoryPolicy: allkeys-lru\n", renderOpts{}), "server settings are not the Job's")
	for what, v := range map[string]string{
		"a user":     usersValues + "  - {name: more}\n",
		"a rotation": strings.Replace(usersValues, "access: readonly", "access: readonly\n    rotation: {generation: 1}", 1),
		"the image":  usersValues + "controller: {image: {tag: \"0.2.0\"}}\n",
	} {
		assert.NotEqual(t, base, name(v, renderOpts{}), "%s changes the Job", what)
	}
	assert.NotEqual(t, base, name(usersValues, renderOpts{upgrade: true, revision: 2}), "every helm upgrade re-reads the Secrets the values name")
	assert.Len(t, decode(t, mustRender(t, "valkey", "controller: {enabled: false}\nupdateStrategy: RollingUpdate\n")).ofKind("Job"), 1, "without the controller too")
	long := strings.Repeat("a", 40)
	assert.LessOrEqual(t, len(name("fullnameOverride: "+long+"\n", renderOpts{})), 63)
}

// TestRenderDoesNotReadTheClock: no template of either chart calls sprig's now (or date functions of it), so
// two renders of the same values on different days are identical, as a GitOps controller rendering on
// schedule needs; values whose previousValidUntil lies years ahead render (the 7-day cap is checked when the
// rotation runs: internal/chartjobs/credentials TestRunRefusesGraceOverSevenDays), identically twice. Before, the
// valkey chart compared previousValidUntil with now: the same values rendered on one day and failed a week
// earlier.
func TestRenderDoesNotReadTheClock(t *testing.T) {
	action := regexp.MustCompile(`(?s)\{\{.*?\}\}`)
	literal := regexp.MustCompile(`(?s)"(\\.|[^"\\])*"|` + "`[^`]*`" + `|/\*.*?\*/`)
	clock := regexp.MustCompile(`\b(now|unixEpoch|dateInZone|date_in_zone|htmlDateInZone|ago)\b`)
	for _, c := range []string{"valkey", "valkey-sentinel"} {
		ch := loadChart(t, c)
		for _, tpl := range ch.Templates {
			for _, a := range action.FindAllString(string(tpl.Data), -1) {
				code := literal.ReplaceAllString(a, `""`)
				assert.False(t, clock.MatchString(code), "%s %s reads the clock: %s", c, tpl.Name, a)
			}
		}
	}
	vals := "users: [{name: app, rotation: {generation: 2, previousValidUntil: \"2999-01-01T00:00:00Z\"}}]\n"
	first := mustRender(t, "valkey", vals, renderOpts{withNotes: true})
	assert.Equal(t, first, mustRender(t, "valkey", vals, renderOpts{withNotes: true}))
}
