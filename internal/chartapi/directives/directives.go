// Package directives holds, for each supported engine version, the server and Sentinel directives its binaries
// accept and the kind of value each one takes. The lists are observed from the real binaries (CONFIG GET * on
// a started server, SENTINEL CONFIG GET * and SENTINEL SET on a started Sentinel, and one start of the binary
// per probe value to read its own refusal message), written as JSON into each chart's engines/ folder, and read
// by the charts (.Files.Get) to refuse a pass-through directive the engine would refuse at start.
//
// Regenerate after adding an engine version (its binaries in internal/testsupport/valkeytest): go generate
// ./internal/chartapi/directives. The same test, without -update, fails when the checked-in data is stale for the
// installed binaries.
package directives

//go:generate go test -count=1 -run TestEngineDirectivesCurrent . -update

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Kind is the kind of value a directive takes, as the engine's config loader reads it.
type Kind string

// Kinds of directive values.
const (
	// Bool takes yes or no (any case).
	Bool Kind = "bool"
	// Integer takes a decimal integer without sign "+" or leading zeros, between Min and Max.
	Integer Kind = "integer"
	// Memory takes bytes or a number with b, k, kb, m, mb, g or gb (any case), between Min and Max bytes.
	Memory Kind = "memory"
	// MemoryOrPercent takes a Memory value or a whole percentage up to MaxPercent ("10%").
	MemoryOrPercent Kind = "memory-or-percent"
	// Octal takes an octal number (unixsocketperm).
	Octal Kind = "octal"
	// Enum takes one of Values (any case), or several separated by spaces when Multi.
	Enum Kind = "enum"
	// Path is a file or directory in the pod; both charts own every path.
	Path Kind = "path"
	// Special has a syntax of its own; Format (when known) is the regular expression a value must match.
	Special Kind = "special"
	// String is free text the loader does not check; Format, when set, narrows it.
	String Kind = "string"
)

// Directive describes one directive's value.
type Directive struct {
	Kind Kind `json:"kind"`
	// Min and Max bound Integer and Memory values (decimal; Memory in bytes). Empty: unbounded on that side.
	Min string `json:"min,omitempty"`
	Max string `json:"max,omitempty"`
	// MaxPercent bounds the percentage form of MemoryOrPercent.
	MaxPercent string `json:"maxPercent,omitempty"`
	// Values are the words of an Enum, in the engine's order.
	Values []string `json:"values,omitempty"`
	// Multi: an Enum value may list several words separated by spaces.
	Multi bool `json:"multi,omitempty"`
	// Format is an RE2 expression a whole value must match (Special, some String); Hint says it in words.
	Format string `json:"format,omitempty"`
	Hint   string `json:"hint,omitempty"`
	// Default is the value CONFIG GET returns on a server started without it, for the directives in Defaults
	// only; the charts use it to check directives against each other.
	Default string `json:"default,omitempty"`
}

// Set is everything one engine version accepts.
type Set struct {
	// Engine is "valkey" or "redis"; Version is major.minor ("8.0"); Observed the full version probed.
	Engine   string `json:"engine"`
	Version  string `json:"version"`
	Observed string `json:"observed"`
	// Server: directives of valkey.conf (and of sentinel.conf, which the same loader reads), by name.
	Server map[string]Directive `json:"server"`
	// Sentinel: the process-global `sentinel <name> <value>` statements of sentinel.conf, by name.
	Sentinel map[string]Directive `json:"sentinel"`
	// SentinelSet: the per-monitor keys SENTINEL SET accepts, by name.
	SentinelSet map[string]Directive `json:"sentinelSet"`
}

// FileName is the data file of an engine version inside a chart: engines/<engine>-<major.minor>.json.
func FileName(engine, version string) string {
	return fmt.Sprintf("engines/%s-%s.json", engine, version)
}

// Marshal renders the set as JSON with sorted keys and one directive per line, so a regeneration diff shows
// exactly the directives that changed.
func (s Set) Marshal() ([]byte, error) {
	var b bytes.Buffer
	head, err := json.Marshal(map[string]string{"engine": s.Engine, "version": s.Version, "observed": s.Observed})
	if err != nil {
		return nil, err
	}
	b.Write(head[:len(head)-1])
	for _, sec := range []struct {
		name string
		m    map[string]Directive
	}{{"server", s.Server}, {"sentinel", s.Sentinel}, {"sentinelSet", s.SentinelSet}} {
		fmt.Fprintf(&b, ",\n%q: {", sec.name)
		names := slices.Sorted(maps.Keys(sec.m))
		for i, n := range names {
			d, err := json.Marshal(sec.m[n])
			if err != nil {
				return nil, err
			}
			sep := ","
			if i == len(names)-1 {
				sep = ""
			}
			fmt.Fprintf(&b, "\n  %q: %s%s", n, d, sep)
		}
		b.WriteString("\n}")
	}
	b.WriteString("\n}\n")
	return b.Bytes(), nil
}

// Parse reads a data file written by Marshal.
func Parse(b []byte) (Set, error) {
	var s Set
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("directive data: %w", err)
	}
	return s, nil
}

// Diff lists, one line each, the directives added, removed or changed from old to new (empty when equal).
func Diff(old, new Set) []string {
	var out []string
	for _, sec := range []struct {
		name     string
		old, new map[string]Directive
	}{{"server", old.Server, new.Server}, {"sentinel", old.Sentinel, new.Sentinel}, {"sentinelSet", old.SentinelSet, new.SentinelSet}} {
		names := map[string]bool{}
		for n := range sec.old {
			names[n] = true
		}
		for n := range sec.new {
			names[n] = true
		}
		for _, n := range slices.Sorted(maps.Keys(names)) {
			o, inOld := sec.old[n]
			w, inNew := sec.new[n]
			switch {
			case !inOld:
				out = append(out, fmt.Sprintf("%s %s: added %s", sec.name, n, describe(w)))
			case !inNew:
				out = append(out, fmt.Sprintf("%s %s: removed", sec.name, n))
			case describe(o) != describe(w):
				out = append(out, fmt.Sprintf("%s %s: %s, was %s", sec.name, n, describe(w), describe(o)))
			}
		}
	}
	return out
}

func describe(d Directive) string {
	b, _ := json.Marshal(d)
	return string(b)
}

// Probe is the value every directive is first tried with: no kind but free text accepts it.
const Probe = "__probe__"

// Messages of the engines' config loaders (valkey 8 and 9, redis 7: src/config.c) that name a value kind.
var (
	boundsRE   = regexp.MustCompile(`must be between (-?[0-9]+) and (-?[0-9]+) inclusive`)
	enumRE     = regexp.MustCompile(`must be one of the following: (.*)$`)
	percentRE  = regexp.MustCompile(`percentage argument must be less or equal to ([0-9]+)`)
	eventsRE   = regexp.MustCompile(`Invalid event class character\. Use '([^']+)'`)
	sentinelNo = "Unrecognized sentinel configuration statement"
)

// ClassifyServerProbe returns the kind the loader revealed when it answered `<name> __probe__` (accepted, or
// refused with message). Unknown refusals are Special.
func ClassifyServerProbe(accepted bool, message string) Directive {
	switch {
	case accepted:
		return Directive{Kind: String}
	case strings.Contains(message, "must be 'yes' or 'no'"), strings.Contains(message, "specify yes or no"):
		return Directive{Kind: Bool}
	case strings.Contains(message, "couldn't be parsed into an integer"):
		return Directive{Kind: Integer}
	case strings.Contains(message, "must be a memory or percent value"):
		return Directive{Kind: MemoryOrPercent}
	case strings.Contains(message, "must be a memory value"):
		return Directive{Kind: Memory}
	case strings.Contains(message, "parsed as an octal number"):
		return Directive{Kind: Octal}
	}
	if m := enumRE.FindStringSubmatch(message); m != nil {
		return Directive{Kind: Enum, Values: strings.Split(m[1], ", ")}
	}
	return Directive{Kind: Special}
}

// ParseBounds reads "argument must be between <min> and <max> inclusive".
func ParseBounds(message string) (min, max string, ok bool) {
	m := boundsRE.FindStringSubmatch(message)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// ParseMaxPercent reads "percentage argument must be less or equal to <n>".
func ParseMaxPercent(message string) (string, bool) {
	m := percentRE.FindStringSubmatch(message)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// KeyspaceEventClasses reads the classes notify-keyspace-events accepts from the loader's refusal
// ("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.").
func KeyspaceEventClasses(message string) (string, bool) {
	m := eventsRE.FindStringSubmatch(message)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// SentinelStatementUnknown reports whether a Sentinel refused `sentinel <name> ...` as unknown.
func SentinelStatementUnknown(message string) bool { return strings.Contains(message, sentinelNo) }

// SentinelSetUnknown reports whether SENTINEL SET refused a key as unknown (not one of its options).
func SentinelSetUnknown(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Unknown option")
}

//go:embed check.tpl
var checkTemplate string

// TemplatePrefix is the prefix of the named templates of each chart ("valkey." / "vs.").
var TemplatePrefix = map[string]string{"valkey": "valkey", "valkey-sentinel": "vs"}

// CheckTemplate returns templates/_directives.tpl of a chart: check.tpl with the chart's template prefix.
func CheckTemplate(chart string) string {
	return strings.ReplaceAll(checkTemplate, "PREFIX.", TemplatePrefix[chart]+".")
}
