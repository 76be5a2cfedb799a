package templatestests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v3/pkg/strvals"
)

// shellAssignment is a line that sets a shell variable (NODE=203.0.113.7   # comment): name, value.
var shellAssignment = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=([^\s'"$]+)(\s+#.*)?$`)

// quickstartFiles hold the `helm install` lines a newcomer copies first.
var quickstartFiles = []string{"../README.md", "../charts/valkey/README.md", "../charts/valkey-sentinel/README.md"}

// TestReadmeQuickstartsInstallAsWritten: every `helm install` line in a sh/bash block of the READMEs renders
// as a shell passes it to Helm (an unquoted `example\.com` reaches Helm as `example.com`, a nested key the
// schema refuses), and in a block that installs instances and a quorum, each instance names a quorum of that
// block (sentinel.release: its F-sentinel-auth RoleBinding is for that quorum's controller) whose
// valkeySelector matches the instance's descriptor labels.
func TestReadmeQuickstartsInstallAsWritten(t *testing.T) {
	installs := 0
	for _, file := range quickstartFiles {
		for bi, block := range shellBlocks(t, file) {
			type quorum struct {
				release, namespace, controllerSA string
				namespaces                       []string // the instances' namespaces it selects (its own, `namespaces`)
				selector                         labels.Selector
			}
			var quorums []quorum
			type instance struct {
				release, namespace, grantedSA, grantedNS string
				labels                                   labels.Set
			}
			var instances []instance
			vars := map[string]string{} // NAME=value lines of the block, as the shell expands $NAME after them
			for _, line := range block {
				if m := shellAssignment.FindStringSubmatch(line); m != nil {
					vars[m[1]] = m[2]
					continue
				}
				words := shellWords(t, line)
				for i, w := range words {
					words[i] = os.Expand(w, func(name string) string {
						if v, ok := vars[name]; ok {
							return v
						}
						return "$" + name
					})
				}
				if len(words) < 4 || words[0] != "helm" || words[1] != "install" {
					continue
				}
				installs++
				rel, chartName := words[2], filepath.Base(words[3])
				vals := map[string]any{}
				ns := "default"
				for i := 4; i < len(words); i++ {
					switch {
					case (words[i] == "-n" || words[i] == "--namespace") && i+1 < len(words):
						i++
						ns = words[i]
					case words[i] == "--set" && i+1 < len(words):
						i++
						require.NoError(t, strvals.ParseInto(words[i], vals), "%s: %s", file, line)
					case words[i] == "--wait": // changes how long helm waits, not what it renders
					case strings.HasPrefix(words[i], "--set="):
						require.NoError(t, strvals.ParseInto(strings.TrimPrefix(words[i], "--set="), vals), "%s: %s", file, line)
					default:
						t.Fatalf("%s: %s: the test understands only --set, -n/--namespace and --wait, not %q", file, line, words[i])
					}
				}
				valuesYAML, err := yaml.Marshal(vals)
				require.NoError(t, err)
				files, err := renderChart(t, chartName, string(valuesYAML), renderOpts{release: rel, namespace: ns})
				if !assert.NoError(t, err, "%s, as a shell runs it: %s", file, line) {
					continue
				}
				objs := decode(t, files)
				switch chartName {
				case "valkey-sentinel":
					sel := metav1.LabelSelector{}
					b, _ := json.Marshal(vals["valkeySelector"])
					require.NoError(t, json.Unmarshal(b, &sel))
					s, err := metav1.LabelSelectorAsSelector(&sel)
					require.NoError(t, err)
					d := objs.get(t, "Deployment", rel+"-controller").(*appsv1.Deployment)
					q := quorum{release: rel, namespace: ns, controllerSA: d.Spec.Template.Spec.ServiceAccountName, namespaces: []string{ns}, selector: s}
					for _, n := range asList(vals["namespaces"]) {
						q.namespaces = append(q.namespaces, fmt.Sprint(n))
					}
					quorums = append(quorums, q)
				case "valkey":
					in := instance{release: rel, namespace: ns}
					for _, o := range objs.ofKind("RoleBinding") {
						if rb := o.(*rbacv1.RoleBinding); strings.HasSuffix(rb.Name, "-sentinel-auth") {
							in.grantedSA, in.grantedNS = rb.Subjects[0].Name, rb.Subjects[0].Namespace
						}
					}
					for _, o := range objs.ofKind("ConfigMap") {
						if strings.HasSuffix(nameOf(o), "-instance") {
							in.labels = objMeta(o).GetLabels()
						}
					}
					instances = append(instances, in)
				}
			}
			if len(quorums) == 0 {
				continue
			}
			for _, in := range instances {
				var named *quorum
				for i := range quorums {
					if quorums[i].controllerSA == in.grantedSA && quorums[i].namespace == in.grantedNS {
						named = &quorums[i]
					}
				}
				if !assert.NotNil(t, named, "%s block %d: instance %s names a quorum whose controller is %s/%s, not one this block installs (add --set sentinel.release=<quorum release>, and sentinel.namespace=<its namespace> for another namespace)", file, bi, in.release, in.grantedNS, in.grantedSA) {
					continue
				}
				assert.Contains(t, named.namespaces, in.namespace, "%s block %d: quorum %s does not select namespace %s (add it to namespaces)", file, bi, named.release, in.namespace)
				assert.True(t, named.selector.Matches(in.labels), "%s block %d: quorum %s's valkeySelector %s does not select instance %s (descriptor labels %v)", file, bi, named.release, named.selector, in.release, in.labels)
			}
		}
	}
	require.GreaterOrEqual(t, installs, 5, "helm install lines found in %v", quickstartFiles)
}

// shellBlocks returns the lines of each ```sh / ```bash block of a Markdown file, a line ending in a backslash
// joined with the next.
func shellBlocks(t *testing.T, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var blocks [][]string
	var cur []string
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case !in && (strings.HasPrefix(l, "```sh") || strings.HasPrefix(l, "```bash")):
			in, cur = true, nil
		case in && strings.HasPrefix(l, "```"):
			in = false
			blocks = append(blocks, cur)
		case in && len(cur) > 0 && strings.HasSuffix(cur[len(cur)-1], "\\"):
			// a line ending in a backslash continues on the next one, as in a shell
			last := cur[len(cur)-1]
			cur[len(cur)-1] = last[:len(last)-1] + " " + l
		case in:
			cur = append(cur, l)
		}
	}
	return blocks
}

// shellWords splits one command line the way a POSIX shell does for these READMEs: single quotes keep
// everything, double quotes keep all but \" and \\, a backslash outside quotes escapes the next character,
// an unquoted # starts a comment, and `;` ends the command (what follows is ignored).
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			require.GreaterOrEqual(t, j, 0, "unterminated ' in %q", line)
			w.WriteString(line[i+1 : i+1+j])
			i, inWord = i+1+j, true
		case c == '"':
			for i++; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) && (line[i+1] == '"' || line[i+1] == '\\') {
					i++
				}
				w.WriteByte(line[i])
			}
			inWord = true
		case c == '\\' && i+1 < len(line):
			i++
			w.WriteByte(line[i])
			inWord = true
		case c == ' ' || c == '\t' || c == ';' || (c == '#' && !inWord):
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
			if c == ';' || c == '#' {
				return words
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// asList returns v as a list ([]any from strvals, e.g. --set 'namespaces={t1,t2}'), or nil.
func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
