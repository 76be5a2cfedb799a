package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// DescriptorVersion is the version of instance.json this build writes (charts/valkey renders the same
// value) and reads: "<major>.<minor>". A descriptor without a version field is read as "1.0" (charts before
// the field existed). A newer minor version only adds fields: they are kept in Instance.Unknown and
// reported, never fatal. A newer major version may change the meaning of known fields and is refused with
// a *VersionError. 1.1 added sentinelRelease (which quorum's Sentinels get the
// instance's credentials), instanceController and sentinelGrant (docs/fleet.md); 1.2 added claims (the volume
// claim every data StatefulSet must hold).
const DescriptorVersion = "1.2"

// VersionError is returned by ParseInstance for a descriptor whose major version is newer than
// DescriptorVersion's. The instance it describes is still there: a controller must not treat it as gone.
type VersionError struct {
	// Version is the descriptor's version field.
	Version string
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("instance.json: version %s is newer than this controller reads (%s): upgrade valkey-sentinel-ctl "+
		"(the charts/valkey-sentinel release) to the version of charts/valkey that wrote it", e.Version, DescriptorVersion)
}

// IsVersionError reports whether err is (or wraps) a *VersionError.
func IsVersionError(err error) bool {
	var v *VersionError
	return errors.As(err, &v)
}

// parseVersion splits "<major>.<minor>" ("" reads as 1.0).
func parseVersion(v string) (major, minor int, err error) {
	if v == "" {
		return 1, 0, nil
	}
	a, b, ok := strings.Cut(v, ".")
	if ok {
		major, err = strconv.Atoi(a)
		if err == nil {
			minor, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || major < 1 || minor < 0 {
		return 0, 0, fmt.Errorf("instance.json: version: %q is not <major>.<minor> (this controller writes %q)", v, DescriptorVersion)
	}
	return major, minor, nil
}

// checkVersion returns a *VersionError for a newer major version, a field error for a malformed one.
func checkVersion(v string) error {
	major, _, err := parseVersion(v)
	if err != nil {
		return err
	}
	ours, _, _ := parseVersion(DescriptorVersion)
	if major > ours {
		return &VersionError{Version: v}
	}
	return nil
}

// unknownFields returns the paths (e.g. "nodes[1].zone") of the fields in raw that t's JSON tags do not
// name, sorted.
func unknownFields(raw json.RawMessage, t reflect.Type) []string {
	var out []string
	walkUnknown(raw, t, "", &out)
	sort.Strings(out)
	return out
}

func walkUnknown(raw json.RawMessage, t reflect.Type, path string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return
		}
		fields := map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			fields[strings.ToLower(name)] = f.Type // encoding/json matches names case-insensitively
		}
		for k, v := range m {
			p := k
			if path != "" {
				p = path + "." + k
			}
			ft, ok := fields[strings.ToLower(k)]
			if !ok {
				*out = append(*out, p)
				continue
			}
			walkUnknown(v, ft, p, out)
		}
	case reflect.Slice:
		var l []json.RawMessage
		if json.Unmarshal(raw, &l) != nil {
			return
		}
		for i, v := range l {
			walkUnknown(v, t.Elem(), fmt.Sprintf("%s[%d]", path, i), out)
		}
	case reflect.Map:
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return
		}
		for k, v := range m {
			walkUnknown(v, t.Elem(), path+"."+k, out)
		}
	}
}
