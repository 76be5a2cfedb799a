package directives

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The loaders' refusals of `<name> __probe__` (valkey 8.0, redis 7.0 src/config.c) name the value kind.
func TestClassifyServerProbe(t *testing.T) {
	for msg, want := range map[string]Directive{
		"argument must be 'yes' or 'no'":                                        {Kind: Bool},
		"Please specify yes or no for the deny-scripts-reconfig options.":       {Kind: Bool},
		"argument couldn't be parsed into an integer":                           {Kind: Integer},
		"argument must be a memory value":                                       {Kind: Memory},
		"argument must be a memory or percent value":                            {Kind: MemoryOrPercent},
		"argument couldn't be parsed as an octal number":                        {Kind: Octal},
		"argument(s) must be one of the following: debug, verbose, notice":      {Kind: Enum, Values: []string{"debug", "verbose", "notice"}},
		"Invalid save parameters":                                               {Kind: Special},
		"Invalid event class character. Use 'Ag$lshzxeKEtmdn'.":                 {Kind: Special},
		"Aborting Valkey startup because of ACL errors: Error loading ACLs ...": {Kind: Special},
	} {
		assert.Equal(t, want, ClassifyServerProbe(false, msg), msg)
	}
	assert.Equal(t, Directive{Kind: String}, ClassifyServerProbe(true, "Configured to not listen anywhere, exiting."))
}

func TestParseBoundsAndClasses(t *testing.T) {
	lo, hi, ok := ParseBounds("argument must be between 0 and 2147483647 inclusive")
	assert.True(t, ok)
	assert.Equal(t, []string{"0", "2147483647"}, []string{lo, hi})
	lo, hi, ok = ParseBounds("argument must be between -1 and 9223372036854775807 inclusive")
	assert.True(t, ok)
	assert.Equal(t, []string{"-1", "9223372036854775807"}, []string{lo, hi})
	_, _, ok = ParseBounds("argument couldn't be parsed into an integer")
	assert.False(t, ok)
	mp, ok := ParseMaxPercent("percentage argument must be less or equal to 100")
	assert.True(t, ok)
	assert.Equal(t, "100", mp)
	c, ok := KeyspaceEventClasses("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")
	assert.True(t, ok)
	assert.Equal(t, "Ag$lshzxeKEtmdn", c)
	assert.True(t, SentinelStatementUnknown("Unrecognized sentinel configuration statement."))
	assert.True(t, SentinelSetUnknown(errors.New("ERR Unknown option or number of arguments for SENTINEL SET 'foo'")))
	assert.False(t, SentinelSetUnknown(errors.New("ERR Invalid argument 'abc' for SENTINEL SET 'quorum'")))
	assert.False(t, SentinelSetUnknown(nil))
}

func TestMarshalRoundTripAndDiff(t *testing.T) {
	s := Set{Engine: "valkey", Version: "8.0", Observed: "8.0.1",
		Server:      map[string]Directive{"timeout": {Kind: Integer, Min: "0", Max: "2147483647"}, "loglevel": {Kind: Enum, Values: []string{"debug", "notice"}}},
		Sentinel:    map[string]Directive{"deny-scripts-reconfig": {Kind: Bool}},
		SentinelSet: map[string]Directive{"quorum": {Kind: Integer, Min: "1"}}}
	b, err := s.Marshal()
	require.NoError(t, err)
	assert.Contains(t, string(b), "\n  \"loglevel\": {", "one directive per line")
	assert.Less(t, strings.Index(string(b), `"loglevel"`), strings.Index(string(b), `"timeout"`), "sorted")
	back, err := Parse(b)
	require.NoError(t, err)
	assert.Equal(t, s, back)
	assert.Empty(t, Diff(s, back))

	changed := back
	changed.Server = map[string]Directive{"timeout": {Kind: Integer, Min: "0", Max: "100"}, "hz": {Kind: Integer}}
	assert.Equal(t, []string{
		`server hz: added {"kind":"integer"}`,
		`server loglevel: removed`,
		`server timeout: {"kind":"integer","min":"0","max":"100"}, was {"kind":"integer","min":"0","max":"2147483647"}`,
	}, Diff(s, changed))
	assert.Equal(t, "engines/redis-7.0.json", FileName("redis", "7.0"))
}

// Every rule compiles, and its examples agree with its own expression (the generator also tries them on the
// binaries).
func TestRulesCompile(t *testing.T) {
	for name, r := range Rules {
		if r.Format == "" {
			continue
		}
		re, err := regexp.Compile(r.Format)
		require.NoError(t, err, name)
		for _, g := range r.Good {
			assert.True(t, re.MatchString(g), "%s good %q", name, g)
		}
		for _, b := range r.Bad {
			assert.False(t, re.MatchString(b), "%s bad %q", name, b)
		}
		assert.NotEmpty(t, r.Hint, name)
	}
}

func TestCheckTemplatePrefixes(t *testing.T) {
	for chart, prefix := range TemplatePrefix {
		tpl := CheckTemplate(chart)
		assert.NotContains(t, tpl, "PREFIX.", chart)
		assert.Contains(t, tpl, `define "`+prefix+`.checkValue"`, chart)
	}
}
