package templatestests

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestRenderCorpus writes what both charts render (or the error they refuse with) for every values file in
// testdata, and for no values, into the directory $RENDER_CORPUS: one file per chart and values file, every
// template (NOTES.txt included) in name order. It skips without RENDER_CORPUS. A refactor of the templates that
// must not change any output (the shared templates, charts/_shared) is checked by writing the corpus before
// and after and diffing the two directories: `RENDER_CORPUS=/tmp/before go test -run TestRenderCorpus ./templates-tests`.
func TestRenderCorpus(t *testing.T) {
	dir := os.Getenv("RENDER_CORPUS")
	if dir == "" {
		t.Skip("set RENDER_CORPUS to a directory to write the render corpus")
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{""}, files...)
	for _, c := range []string{"valkey", "valkey-sentinel"} {
		for _, f := range files {
			values := []byte{}
			name := "no-values"
			if f != "" {
				if values, err = os.ReadFile(f); err != nil {
					t.Fatal(err)
				}
				name = strings.ReplaceAll(strings.TrimSuffix(f, ".yaml"), string(filepath.Separator), "_")
			}
			var b strings.Builder
			out, err := renderChart(t, c, string(values), renderOpts{withNotes: true})
			if err != nil {
				b.WriteString("ERROR: " + err.Error() + "\n")
			}
			keys := make([]string, 0, len(out))
			for k := range out {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				b.WriteString("=== " + k + "\n" + out[k] + "\n")
			}
			if err := os.WriteFile(filepath.Join(dir, c+"__"+name+".txt"), []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
