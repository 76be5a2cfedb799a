package backup

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/valkey-ha/valkey-ha/internal/podsteps/bootstrap"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// RestoredMarker is the file Restore leaves in a data directory it filled (its content names the backup): a
// restore happens once per volume, never again after the node ran.
const RestoredMarker = ".valkey-ha-restored"

// RestoreOptions say which backup goes into which data directory.
type RestoreOptions struct {
	// From is the snapshot file (on the mounted restore volume); its metadata file is From + ".json".
	From string
	// DataDir is the node's data directory; Files are its server's persistence settings (the config template:
	// with appendonly on, the server loads only the AOF, so the snapshot becomes the AOF's base file too).
	DataDir string
	Files   bootstrap.ServerFiles
	// ServerVersion is the `--version` output of the server that will load the data ("Valkey server v=9.1.2
	// ..."); the snapshot's RDB version must be one it reads (MaxRDBVersion). Empty: not checked.
	ServerVersion string
}

// RestoreResult says what Restore did.
type RestoreResult struct {
	// Skipped is set (with the reason) when the data directory already held data or a restore: nothing was
	// written.
	Skipped string
	Meta    Meta
}

// ErrRefused marks a backup Restore will not load: corrupt (hash or size differ from its metadata, or the
// header does not parse), or written in an RDB version the server cannot read.
var ErrRefused = errors.New("restore refused")

// Restore fills an empty data directory with a backup before the server starts. It never touches a directory
// that holds data or was restored before (the node ran, or a restart of this step): it then returns Skipped.
// The backup is checked first (metadata hash and size when the metadata file exists, RDB header, RDB version
// against ServerVersion); a refusal wraps ErrRefused and names the reason. The files are written under
// temporary names and renamed; a failure (a full volume) removes them, so the directory stays as it was.
func Restore(o RestoreOptions) (RestoreResult, error) {
	if why := SkipRestore(o.DataDir, o.Files); why != "" {
		return RestoreResult{Skipped: why}, nil
	}
	src, err := os.Open(o.From)
	if err != nil {
		return RestoreResult{}, fmt.Errorf("restoreFrom: backup %s: %w: check restoreFrom.persistentVolumeClaim and restoreFrom.file", o.From, err)
	}
	defer src.Close()
	got, err := Inspect(o.From)
	if err != nil {
		return RestoreResult{}, fmt.Errorf("%w: %v", ErrRefused, err)
	}
	meta, err := ReadMeta(o.From + ".json")
	switch {
	case errors.Is(err, os.ErrNotExist):
		meta = got // a snapshot from elsewhere: the header checks below still apply
	case err != nil:
		return RestoreResult{}, fmt.Errorf("%w: metadata of %s: %v", ErrRefused, filepath.Base(o.From), err)
	case meta.SHA256 != got.SHA256 || meta.Size != got.Size:
		return RestoreResult{}, fmt.Errorf("%w: %s is corrupt: %d bytes with SHA-256 %s, its metadata says %d bytes with %s",
			ErrRefused, filepath.Base(o.From), got.Size, got.SHA256, meta.Size, meta.SHA256)
	}
	if max, ok := MaxRDBVersion(o.ServerVersion); ok && !valkey.LoadsRDB(max, got.RDBVersion) {
		return RestoreResult{}, fmt.Errorf("%w: %s was written by %s %s in RDB format %d; this server (%s) reads up to RDB %d (Valkey 9: 11 and 80): restore it with that engine and version or newer",
			ErrRefused, filepath.Base(o.From), got.Engine, got.EngineVersion, got.RDBVersion, strings.TrimSpace(o.ServerVersion), max)
	}
	var written []string
	fail := func(err error) (RestoreResult, error) {
		for i := len(written) - 1; i >= 0; i-- {
			os.RemoveAll(written[i])
		}
		if isNoSpace(err) {
			return RestoreResult{}, fmt.Errorf("restore %s into %s: the data volume is full (the backup is %d bytes): enlarge persistence.size", filepath.Base(o.From), o.DataDir, got.Size)
		}
		return RestoreResult{}, fmt.Errorf("restore %s into %s: %w", filepath.Base(o.From), o.DataDir, err)
	}
	rdb := filepath.Join(o.DataDir, o.Files.DBFilename)
	written = append(written, rdb)
	if err := copyFile(o.From, rdb); err != nil {
		return fail(err)
	}
	if o.Files.AppendOnly {
		// multi-part AOF (valkey 7+, redis 7+): a manifest naming one base file, here in RDB format
		dir := filepath.Join(o.DataDir, o.Files.AppendDirname)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fail(err)
		}
		written = append(written, dir)
		base := o.Files.AppendFilename + ".1.base.rdb"
		if err := copyFile(o.From, filepath.Join(dir, base)); err != nil {
			return fail(err)
		}
		manifest := fmt.Sprintf("file %s seq 1 type b\n", base)
		if err := writeFileSync(filepath.Join(dir, o.Files.AppendFilename+".manifest"), []byte(manifest)); err != nil {
			return fail(err)
		}
	}
	if err := writeFileSync(filepath.Join(o.DataDir, RestoredMarker), []byte(filepath.Base(o.From)+"\n")); err != nil {
		return fail(err)
	}
	meta.Size, meta.SHA256 = got.Size, got.SHA256
	return RestoreResult{Meta: meta}, nil
}

// SkipRestore returns why a restore into dataDir must not happen (it was restored before, or it holds data),
// "" when it may. Restore checks it first; the S3 restore checks it before downloading anything, so a node
// that restarts with restoreFrom still set reads nothing from the bucket.
func SkipRestore(dataDir string, files bootstrap.ServerFiles) string {
	if _, err := os.Stat(filepath.Join(dataDir, RestoredMarker)); err == nil {
		return "this volume was restored before"
	}
	p, err := bootstrap.ReadPersisted(dataDir, files)
	if err != nil || p.HasData {
		return "the data directory already holds data (" + p.String() + "); a restore never overwrites it"
	}
	return ""
}

// copyFile copies src to dst through a temporary file that is synced and renamed.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".partial"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", dst, err)
	}
	return os.Rename(tmp, dst)
}

func writeFileSync(path string, b []byte) error {
	tmp := path + ".partial"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

var versionRE = regexp.MustCompile(`^(Valkey|Redis) server v=(\d+)\.(\d+)`)

// MaxRDBVersion returns the newest RDB format version the server whose `--version` output is given can load:
// Redis 7.0 reads 10, Redis 7.2 and Valkey 7.2 to 8.x read 11, Redis 7.4 reads 12, Valkey 9 reads 80 (Valkey
// source rdb.h RDB_VERSION and the RDB_FOREIGN_VERSION range it refuses; Redis 7.x rdb.h). ok is false for an
// output it does not recognise: the server then decides alone.
func MaxRDBVersion(serverVersion string) (int, bool) {
	m := versionRE.FindStringSubmatch(strings.TrimSpace(serverVersion))
	if m == nil {
		return 0, false
	}
	major, _ := strconv.Atoi(m[2])
	minor, _ := strconv.Atoi(m[3])
	engine := "redis"
	if m[1] == "Valkey" {
		engine = "valkey"
	}
	return valkey.RDBVersionOf(engine, major, minor)
}
