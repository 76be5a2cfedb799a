package bootstrap

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ServerFiles are the settings of a server config that decide which files the server loads at start.
type ServerFiles struct {
	// AppendOnly is `appendonly yes`: the server then loads only the AOF (and starts empty without one).
	AppendOnly bool
	// DBFilename (default dump.rdb), AppendDirname (default appendonlydir) and AppendFilename (default
	// appendonly.aof, the manifest is <AppendFilename>.manifest) name the files inside the data directory.
	DBFilename     string
	AppendDirname  string
	AppendFilename string
	// TLSCertFile and TLSKeyFile are the server's TLS key pair (the boot step serves its persisted position
	// with them on a TLS-only instance).
	TLSCertFile string
	TLSKeyFile  string
}

// ParseServerFiles reads the persistence directives of a server config text (the last occurrence wins, as
// in the server's own parser; values may be double-quoted).
func ParseServerFiles(conf string) ServerFiles {
	f := ServerFiles{DBFilename: "dump.rdb", AppendDirname: "appendonlydir", AppendFilename: "appendonly.aof"}
	for _, line := range strings.Split(conf, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			continue
		}
		fields, err := splitArgs(line)
		if err != nil || len(fields) < 2 {
			continue
		}
		v := fields[1]
		switch strings.ToLower(fields[0]) {
		case "appendonly":
			f.AppendOnly = strings.EqualFold(v, "yes")
		case "dbfilename":
			f.DBFilename = v
		case "appenddirname":
			f.AppendDirname = v
		case "appendfilename":
			f.AppendFilename = v
		case "tls-cert-file":
			f.TLSCertFile = v
		case "tls-key-file":
			f.TLSKeyFile = v
		}
	}
	return f
}

// Persisted is what a node's data directory holds, judged the way the server loads it at start.
type Persisted struct {
	// HasData is true when the server would start with keys (or functions): from the AOF when appendonly is
	// on, else from the RDB file. A file that cannot be read or parsed counts as data: never risk what cannot
	// be seen.
	HasData bool
	// Known is true when the RDB file records a replication position: ReplID (40 hex characters) and Offset
	// (bytes of the replication stream). The AOF records none (its RDB preamble is saved without replication
	// info), so with appendonly on this is the position of the last RDB save (every save point, the shutdown
	// save, and a replica's full sync), which after a crash may lag the AOF by up to one save interval.
	Known  bool
	ReplID string
	Offset int64
	// Source names the files that decided, for the log.
	Source string
	// Engine is the server family that wrote the RDB file ("valkey" or "redis", EngineOf), EngineVersion
	// the version it recorded; both "" when there is no RDB file or it records neither.
	Engine, EngineVersion string
}

// EngineOf returns the server family and version that wrote an RDB file, from its header: "valkey" when
// the magic is VALKEY (Valkey 9+) or an aux field valkey-ver is present (Valkey 8), "redis" when only
// redis-ver is (Redis; also Valkey 7.2, which the charts do not run); "" when neither is recorded.
func EngineOf(h RDBHeader) (engine, version string) {
	switch {
	case h.Magic == "VALKEY" || h.Aux["valkey-ver"] != "":
		return "valkey", h.Aux["valkey-ver"]
	case h.Aux["redis-ver"] != "":
		return "redis", h.Aux["redis-ver"]
	}
	return "", ""
}

// ErrStartRefused marks a start step refused because the values cannot apply to what the node holds
// (CheckEngine): the data container writes the message to its termination message, where the instance
// controller reads it (StartRefused event, ValuesAccepted condition).
var ErrStartRefused = errors.New("start refused")

// CheckEngine refuses to start engine on a data directory whose RDB file another engine wrote (p.Engine):
// the run-time twin of the chart's render-time guard on a changed `engine` value, which a render without the
// cluster (Argo CD, Flux, helm template) skips. The error names the value and the fix; nil when the engines
// match or the directory records none.
func CheckEngine(engine string, p Persisted) error {
	if p.Engine == "" || p.Engine == engine {
		return nil
	}
	return startRefusal(fmt.Sprintf("engine: the RDB file on this node's volume was written by %s %s and engine cannot change (data files are not interchangeable), so %s is not started on it; keep engine: %s, or install a new release and migrate",
		p.Engine, p.EngineVersion, engine, p.Engine))
}

// String describes the dataset for logs and decisions.
func (p Persisted) String() string {
	if !p.HasData {
		return "no persisted data (" + p.Source + ")"
	}
	if !p.Known {
		return "persisted data without a recorded replication position (" + p.Source + ")"
	}
	return fmt.Sprintf("persisted data at repl-id %s offset %d (%s)", p.ReplID, p.Offset, p.Source)
}

// ReadPersisted inspects dir the way the server would load it with the settings f. It reads only file
// headers and sizes, never the keys. An error is returned with a Persisted that counts as data.
func ReadPersisted(dir string, f ServerFiles) (Persisted, error) {
	var p Persisted
	rdbPath := filepath.Join(dir, f.DBFilename)
	rdb, rdbErr := readRDBFile(rdbPath)
	switch {
	case rdbErr == nil:
		p.ReplID, p.Offset, p.Known = rdb.Position()
		p.Engine, p.EngineVersion = EngineOf(rdb)
	case errors.Is(rdbErr, os.ErrNotExist):
		rdbErr = nil
	}
	if !f.AppendOnly {
		p.Source = f.DBFilename
		if rdbErr != nil {
			p.HasData = true
			return p, fmt.Errorf("read %s: %w", rdbPath, rdbErr)
		}
		p.HasData = rdb.HasData
		return p, nil
	}
	has, source, err := aofHasData(dir, f)
	p.HasData, p.Source = has, source
	if err != nil {
		p.HasData = true
		return p, err
	}
	return p, nil
}

func readRDBFile(path string) (RDBHeader, error) {
	fh, err := os.Open(path)
	if err != nil {
		return RDBHeader{}, err
	}
	defer fh.Close()
	if fi, err := fh.Stat(); err == nil && fi.Size() == 0 {
		return RDBHeader{Aux: map[string]string{}}, nil
	}
	return ParseRDBHeader(fh)
}

// aofHasData reports whether the AOF the server would load holds data: its base file (RDB preamble: records
// after the aux fields; AOF format: any content) or any non-empty incremental file. Without a manifest, a
// legacy single-file AOF counts when not empty; without any AOF the server starts empty.
func aofHasData(dir string, f ServerFiles) (bool, string, error) {
	aofDir := filepath.Join(dir, f.AppendDirname)
	manifest := filepath.Join(aofDir, f.AppendFilename+".manifest")
	b, err := os.ReadFile(manifest)
	if errors.Is(err, os.ErrNotExist) {
		legacy := filepath.Join(dir, f.AppendFilename)
		if fi, err := os.Stat(legacy); err == nil {
			return fi.Size() > 0, f.AppendFilename, nil
		}
		return false, "no AOF", nil
	}
	src := filepath.Join(f.AppendDirname, f.AppendFilename+".manifest")
	if err != nil {
		return true, src, fmt.Errorf("read %s: %w", manifest, err)
	}
	files, err := ParseAOFManifest(string(b))
	if err != nil {
		return true, src, fmt.Errorf("%s: %w", manifest, err)
	}
	for _, mf := range files {
		path := filepath.Join(aofDir, mf.Name)
		switch mf.Type {
		case "b":
			has, err := aofBaseHasData(path)
			if err != nil || has {
				return true, src, err
			}
		case "i":
			fi, err := os.Stat(path)
			if err != nil {
				return true, src, fmt.Errorf("incremental AOF %s: %w", path, err)
			}
			if fi.Size() > 0 {
				return true, src, nil
			}
		}
	}
	return false, src, nil
}

func aofBaseHasData(path string) (bool, error) {
	fh, err := os.Open(path)
	if err != nil {
		return true, fmt.Errorf("base AOF %s: %w", path, err)
	}
	defer fh.Close()
	h, err := ParseRDBHeader(fh)
	if err == nil {
		return h.HasData, nil
	}
	if errors.Is(err, ErrNotRDB) { // an AOF-format base: commands, or nothing for an empty dataset
		fi, serr := fh.Stat()
		if serr != nil {
			return true, serr
		}
		return fi.Size() > 0, nil
	}
	return true, fmt.Errorf("base AOF %s: %w", path, err)
}

// AOFFile is one line of an AOF manifest: "file <name> seq <n> type <b|h|i>" (aof.c, aofInfoFormat).
type AOFFile struct {
	Name string
	Seq  int64
	// Type is "b" (base), "h" (history, to be deleted) or "i" (incremental).
	Type string
}

// ParseAOFManifest parses an AOF manifest. Names may be double-quoted; unknown keys are ignored, as the
// server does. A line without a name or a type is an error.
func ParseAOFManifest(text string) ([]AOFFile, error) {
	var out []AOFFile
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		args, err := splitArgs(line)
		if err != nil || len(args)%2 != 0 {
			return nil, fmt.Errorf("manifest line %d: malformed %q", n, truncateLine(line))
		}
		var f AOFFile
		for i := 0; i < len(args); i += 2 {
			switch args[i] {
			case "file":
				f.Name = args[i+1]
			case "seq":
				f.Seq, _ = strconv.ParseInt(args[i+1], 10, 64)
			case "type":
				f.Type = args[i+1]
			}
		}
		if f.Name == "" || f.Type == "" || strings.ContainsAny(f.Name, "/\\") {
			return nil, fmt.Errorf("manifest line %d: no file name or type in %q", n, truncateLine(line))
		}
		out = append(out, f)
	}
	return out, sc.Err()
}

// splitArgs splits a line into space-separated words, reading double-quoted words with Go escapes (the
// server writes names with sdscatrepr, whose escapes are a subset).
func splitArgs(line string) ([]string, error) {
	var out []string
	for line = strings.TrimLeft(line, " \t"); line != ""; line = strings.TrimLeft(line, " \t") {
		if line[0] == '"' {
			q, err := strconv.QuotedPrefix(line)
			if err != nil {
				return nil, err
			}
			u, err := strconv.Unquote(q)
			if err != nil {
				return nil, err
			}
			out = append(out, u)
			line = line[len(q):]
			continue
		}
		i := strings.IndexAny(line, " \t")
		if i < 0 {
			i = len(line)
		}
		out = append(out, line[:i])
		line = line[i:]
	}
	return out, nil
}

func truncateLine(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// startRefusal is an error whose text is msg alone and which errors.Is ErrStartRefused.
type startRefusal string

func (e startRefusal) Error() string        { return string(e) }
func (e startRefusal) Is(target error) bool { return target == ErrStartRefused }
