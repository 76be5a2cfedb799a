// Package backup takes RDB snapshots of an instance from a replica into a directory (a mounted volume) and
// restores one into the data directory of a new instance's first node before its server starts
// (README "Backups and restore").
//
// A snapshot is `valkey-cli --rdb` (REPLCONF rdb-only 1, then SYNC) against a replica whose link to the primary
// is up, as the _backup system user (acl.SystemUsers: +sync +replconf, and +info to find a replica). The
// replica forks and streams its dataset; the primary is never asked for anything. The snapshot is written to a
// temporary file, checked (the RDB header parses; the engine and replication position come from it), hashed,
// then renamed to <instance>-<UTC timestamp>.rdb with a metadata file <same name>.json beside it (Meta); the
// oldest pairs beyond the retention are removed last, so a failed snapshot never costs an older backup.
package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/podsteps/bootstrap"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// MetaVersion is the version of the Meta document this package writes and reads.
const MetaVersion = "1"

// Meta is the metadata file <backup>.json written beside each snapshot.
type Meta struct {
	Version  string `json:"version"`
	Instance string `json:"instance"`
	// File is the snapshot's file name (no directory).
	File string `json:"file"`
	// Node is the replica the snapshot was taken from ("host:port").
	Node string `json:"node"`
	// Engine and EngineVersion are the server family and version that wrote the snapshot (RDB header aux
	// fields; bootstrap.EngineOf); RDBVersion is the RDB format version of its header.
	Engine        string `json:"engine"`
	EngineVersion string `json:"engineVersion"`
	RDBVersion    int    `json:"rdbVersion"`
	// Size is the snapshot's size in bytes; SHA256 its hex SHA-256.
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// ReplID and ReplOffset are the replication position the snapshot records (RDB aux repl-id, repl-offset);
	// empty and 0 when it records none.
	ReplID     string `json:"replId,omitempty"`
	ReplOffset int64  `json:"replOffset"`
	// StartedAt and FinishedAt bound the snapshot (UTC); DurationSeconds is their difference.
	StartedAt       time.Time `json:"startedAt"`
	FinishedAt      time.Time `json:"finishedAt"`
	DurationSeconds float64   `json:"durationSeconds"`
	// UploadSeconds is how long the upload of the snapshot to S3-compatible storage took (S3.Upload: the
	// snapshot object, in seconds); 0 for a backup kept on the volume only.
	UploadSeconds float64 `json:"uploadSeconds,omitempty"`
}

// SnapshotOptions say where to take a snapshot from and where to put it.
type SnapshotOptions struct {
	// Instance is the release fullname, the prefix of every backup file name.
	Instance string
	// Nodes are the instance's nodes ("host:port", index order); the snapshot is taken from the first replica
	// among them whose link to the primary is up.
	Nodes []string
	// Client authenticates as the _backup user (INFO replication on each node); RESP2, as _backup has no +hello.
	Client valkey.Options
	// Dir is the target directory (the backup volume). Retention is how many backups of Instance to keep
	// (>= 1).
	Dir       string
	Retention int
	// CLI runs the engine's command-line client with args (valkey-cli or redis-cli); the password is passed
	// in the environment (REDISCLI_AUTH), never on the command line.
	CLI func(args ...string) *exec.Cmd
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Result is what Snapshot did.
type Result struct {
	Meta Meta
	// Pruned are the files removed beyond the retention.
	Pruned []string
}

// Snapshot takes one snapshot (see the package comment). Errors name the step and the fix: no replica with a
// live link (a backup never runs on the primary), an unwritable or full target, a snapshot that does not parse.
func Snapshot(ctx context.Context, o SnapshotOptions) (Result, error) {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	if o.Retention < 1 {
		return Result{}, fmt.Errorf("backup.retention: %d, keep at least 1", o.Retention)
	}
	if fi, err := os.Stat(o.Dir); err != nil || !fi.IsDir() {
		return Result{}, fmt.Errorf("backup target %s is not a mounted directory (%v): check backup.persistentVolumeClaim", o.Dir, err)
	}
	node, err := pickReplica(ctx, o.Nodes, o.Client)
	if err != nil {
		return Result{}, err
	}
	start := now().UTC()
	name := fmt.Sprintf("%s-%s.rdb", o.Instance, start.Format("20060102T150405Z"))
	tmp := filepath.Join(o.Dir, "."+name+".partial")
	defer os.Remove(tmp) // a failed step leaves nothing behind; after the rename this is a no-op

	host, port, _ := strings.Cut(node, ":")
	args := []string{"-h", host, "-p", port, "--user", o.Client.Username, "--rdb", tmp}
	cmd := o.CLI(args...)
	cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+o.Client.Password)
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		// valkey-cli reports ENOSPC as "Error writing data to file: short write"; the volume itself tells
		// (the partial file is still there)
		if isNoSpace(err) || strings.Contains(msg, "No space left") || volumeFull(o.Dir) {
			return Result{}, fmt.Errorf("snapshot of %s into %s: the backup volume is full (%s): enlarge it or lower backup.retention", node, o.Dir, lastLine(msg))
		}
		return Result{}, fmt.Errorf("snapshot of %s (%s --rdb): %w: %s", node, cmd.Path, err, lastLine(msg))
	}
	meta, err := Inspect(tmp)
	if err != nil {
		return Result{}, fmt.Errorf("snapshot of %s: %w", node, err)
	}
	end := now().UTC()
	meta.Version, meta.Instance, meta.File, meta.Node = MetaVersion, o.Instance, name, node
	meta.StartedAt, meta.FinishedAt, meta.DurationSeconds = start, end, end.Sub(start).Seconds()
	if err := os.Rename(tmp, filepath.Join(o.Dir, name)); err != nil {
		return Result{}, fmt.Errorf("backup %s: rename: %w", name, err)
	}
	if err := writeMeta(filepath.Join(o.Dir, name+".json"), meta); err != nil {
		os.Remove(filepath.Join(o.Dir, name))
		if isNoSpace(err) {
			return Result{}, fmt.Errorf("backup %s: the backup volume is full writing its metadata: enlarge it or lower backup.retention", name)
		}
		return Result{}, fmt.Errorf("backup %s: %w", name, err)
	}
	pruned, err := Prune(o.Dir, o.Instance, o.Retention)
	if err != nil {
		return Result{Meta: meta, Pruned: pruned}, fmt.Errorf("backup %s taken, but pruning beyond retention failed: %w", name, err)
	}
	return Result{Meta: meta, Pruned: pruned}, nil
}

// pickReplica returns the first node that answers as a replica with its link to the primary up.
func pickReplica(ctx context.Context, nodes []string, o valkey.Options) (string, error) {
	var why []string
	for _, addr := range nodes {
		c, err := valkey.Dial(ctx, addr, o)
		if err != nil {
			why = append(why, fmt.Sprintf("%s: %v", addr, err))
			continue
		}
		r, err := c.InfoReplication(ctx)
		c.Close()
		switch {
		case err != nil:
			why = append(why, fmt.Sprintf("%s: %v", addr, err))
		case r.Role != valkey.RoleReplica:
			why = append(why, addr+": "+string(r.Role))
		case !r.LinkUp:
			why = append(why, addr+": replica with its link down")
		default:
			return addr, nil
		}
	}
	return "", fmt.Errorf("no replica with its link to the primary up (a backup is never taken from the primary): %s", strings.Join(why, "; "))
}

// Inspect reads a snapshot file: its RDB header (which must parse and end in data or EOF), size and SHA-256.
// It fills the content fields of Meta (engine, RDB version, size, hash, position).
func Inspect(path string) (Meta, error) {
	f, err := os.Open(path)
	if err != nil {
		return Meta{}, err
	}
	defer f.Close()
	h, err := bootstrap.ParseRDBHeader(f)
	if err != nil {
		return Meta{}, fmt.Errorf("%s is not an RDB file: %w", filepath.Base(path), err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Meta{}, err
	}
	sum := sha256.New()
	n, err := io.Copy(sum, f)
	if err != nil {
		return Meta{}, fmt.Errorf("read %s: %w", path, err)
	}
	m := Meta{RDBVersion: h.Version, Size: n, SHA256: hex.EncodeToString(sum.Sum(nil))}
	m.Engine, m.EngineVersion = bootstrap.EngineOf(h)
	m.ReplID, m.ReplOffset, _ = h.Position()
	return m, nil
}

func writeMeta(path string, m Meta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".partial"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// ReadMeta reads and checks a metadata file.
func ReadMeta(path string) (Meta, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Meta{}, err
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return Meta{}, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	if m.Version != MetaVersion {
		return Meta{}, fmt.Errorf("%s: version %q, this valkey-sentinel-ctl reads %q", filepath.Base(path), m.Version, MetaVersion)
	}
	return m, nil
}

// Backups returns the snapshot file names of instance in dir, oldest first (the UTC timestamp in the name
// sorts by time).
func Backups(dir, instance string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list backups in %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		if n := e.Name(); isBackupName(n, instance) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Prune removes the oldest backups of instance (each snapshot with its metadata file) beyond keep; it returns
// the snapshot names removed.
func Prune(dir, instance string, keep int) ([]string, error) {
	all, err := Backups(dir, instance)
	if err != nil {
		return nil, err
	}
	var removed []string
	for len(all) > keep {
		n := all[0]
		all = all[1:]
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, fmt.Errorf("remove %s: %w", n, err)
		}
		if err := os.Remove(filepath.Join(dir, n+".json")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, fmt.Errorf("remove %s.json: %w", n, err)
		}
		removed = append(removed, n)
	}
	return removed, nil
}

func isNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }

// volumeFull reports whether the file system of dir has less than 64 KiB left for unprivileged writers.
func volumeFull(dir string) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false
	}
	return st.Bavail*uint64(st.Bsize) < 64<<10
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
