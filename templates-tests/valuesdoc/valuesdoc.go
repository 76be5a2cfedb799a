// Package valuesdoc turns the "# --" comments of a chart's values.yaml into the values table of its
// README.md, between the markers <!-- values:start --> and <!-- values:end -->.
package valuesdoc

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

const (
	// StartMarker and EndMarker delimit the generated table in README.md.
	StartMarker = "<!-- values:start -->"
	EndMarker   = "<!-- values:end -->"
)

var keyLine = regexp.MustCompile(`^(\s*)([A-Za-z0-9_.-]+):(\s.*)?$`)

// Row is one documented key.
type Row struct {
	Key, Type, Default, Description string
}

// Rows parses values.yaml and returns one row per key preceded by a "# --" comment, in file order.
func Rows(valuesYAML []byte) ([]Row, error) {
	var values map[string]any
	if err := yaml.Unmarshal(valuesYAML, &values); err != nil {
		return nil, fmt.Errorf("parse values.yaml: %w", err)
	}
	type frame struct {
		indent int
		key    string
	}
	var (
		stack   []frame
		pending []string
		inDoc   bool
		rows    []Row
	)
	for i, line := range strings.Split(string(valuesYAML), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "# --"):
			pending = []string{strings.TrimSpace(strings.TrimPrefix(trimmed, "# --"))}
			inDoc = true
			continue
		case strings.HasPrefix(trimmed, "#"):
			if inDoc {
				pending = append(pending, strings.TrimSpace(strings.TrimPrefix(trimmed, "#")))
			}
			continue
		case trimmed == "" || strings.HasPrefix(trimmed, "-"):
			if trimmed == "" {
				pending, inDoc = nil, false
			}
			continue
		}
		m := keyLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("values.yaml line %d: cannot parse %q", i+1, line)
		}
		indent := len(m[1])
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, frame{indent, m[2]})
		if inDoc {
			path := make([]string, len(stack))
			for j, f := range stack {
				path[j] = f.key
			}
			v, ok := lookup(values, path)
			if !ok {
				return nil, fmt.Errorf("values.yaml line %d: %s not found in parsed values", i+1, strings.Join(path, "."))
			}
			def, err := json.Marshal(v)
			if err != nil {
				return nil, err
			}
			rows = append(rows, Row{
				Key:         strings.Join(path, "."),
				Type:        typeOf(v),
				Default:     string(def),
				Description: strings.Join(pending, " "),
			})
		}
		pending, inDoc = nil, false
	}
	return rows, nil
}

func lookup(m map[string]any, path []string) (any, bool) {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = mm[p]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

func typeOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case float64, int, int64:
		return "int"
	case string:
		return "string"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// Table renders the rows as a Markdown table.
func Table(rows []Row) string {
	var b strings.Builder
	b.WriteString("| Key | Type | Default | Description |\n|-----|------|---------|-------------|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s |\n", r.Key, r.Type, cell(r.Default), cell(r.Description))
	}
	return b.String()
}

// Update returns readme with the table between the markers replaced by the table of valuesYAML.
func Update(readme, valuesYAML []byte) (string, error) {
	rows, err := Rows(valuesYAML)
	if err != nil {
		return "", err
	}
	s := string(readme)
	start := strings.Index(s, StartMarker)
	end := strings.Index(s, EndMarker)
	if start < 0 || end < start {
		return "", fmt.Errorf("README.md has no %s ... %s section", StartMarker, EndMarker)
	}
	return s[:start+len(StartMarker)] + "\n" + Table(rows) + s[end:], nil
}
