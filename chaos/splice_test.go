package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/valkey-ha/valkey-ha/internal/testsupport/testenv"
)

// TestSummaryWritesOneSection: CHAOS_UPDATE=1 (make chaos) writes the loopback table into RELIABILITY.md: the
// section is appended once (or replaces the one there), replaced (never repeated) by the next run, the rest of the file kept byte for
// byte, and every table row has as many cells as its header. Pure: no processes.
func TestSummaryWritesOneSection(t *testing.T) {
	current, err := os.ReadFile(filepath.Join("..", "RELIABILITY.md"))
	require.NoError(t, err)
	for _, orig := range [][]byte{current, []byte(withoutSection(string(current)) + "\n")} {
		checkSplice(t, orig)
	}
}

func checkSplice(t *testing.T, orig []byte) {
	path := filepath.Join(t.TempDir(), "RELIABILITY.md")
	require.NoError(t, os.WriteFile(path, orig, 0o644))
	seed := uint64(7)
	results := []phaseResult{
		{round: 1, seed: roundSeed(seed, 0), name: "steady", acked: 2900, failed: 3, faults: []string{"pause primary 1.2s at +3.1s"}},
		{round: 1, seed: roundSeed(seed, 0), name: "roll", acked: 3100, failed: 40, switches: 1, failoverCmd: 1, rolled: true,
			ctl: map[string]int{"PrimaryHandedOff": 1}, windowsUnplanned: []testenv.Window{{From: time.Unix(0, 0), To: time.Unix(1, 0)}}},
		{round: 1, seed: roundSeed(seed, 0), name: "settle", acked: 900},
	}
	for run := 0; run < 2; run++ {
		s := summarize(results, 1, seed, 90*time.Second)
		require.NoError(t, spliceSection(path, s.markdown(nil)))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	text := string(got)
	assert.Equal(t, 1, strings.Count(text, sectionBegin), "one section after two runs")
	assert.Equal(t, 1, strings.Count(text, sectionEnd))
	assert.Equal(t, withoutSection(string(orig)), withoutSection(text), "the rest of the file is kept")
	section := text[strings.Index(text, sectionBegin):]
	assert.Contains(t, section, "Run of ")
	assert.Contains(t, section, "1 rounds (`CHAOS_SEED=7`)")
	var header int
	for _, l := range strings.Split(section, "\n") {
		if !strings.HasPrefix(l, "|") {
			continue
		}
		cells := strings.Count(l, "|") - 1
		if header == 0 {
			header = cells
			continue
		}
		assert.Equal(t, header, cells, "row %q", l)
	}
	assert.Equal(t, 15, header, "the table's columns")
	assert.Contains(t, section, "| planned roll | 1 | 3100 | 40 | **0** |")
	for _, target := range s0targets(results, seed) {
		assert.Contains(t, section, target)
	}
}

// withoutSection is text with the loopback chaos section (if any) cut out and trailing newlines trimmed.
func withoutSection(text string) string {
	i, j := strings.Index(text, sectionBegin), strings.Index(text, sectionEnd)
	if i >= 0 && j > i {
		text = text[:i] + text[j+len(sectionEnd):]
	}
	return strings.TrimRight(text, "\n")
}

func s0targets(results []phaseResult, seed uint64) []string {
	var out []string
	for _, l := range summarize(results, 1, seed, 0).targets() {
		out = append(out, "- "+l)
	}
	return out
}
