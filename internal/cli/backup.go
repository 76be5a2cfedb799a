package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/backup"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/bootstrap"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// BackupOptions are the flags of `backup`.
type BackupOptions struct {
	InstanceFile string
	PasswordFile string
	Dir          string
	Retention    int
	CLI          string
	Timeout      time.Duration
	// TerminationLog receives the one-line reason of a failure (the Job pod's terminationMessagePath), or on
	// success the backup's metadata (one JSON line, backup.Meta), which the instance controller exports as
	// metrics.
	TerminationLog string
	// S3 is the object storage target (S3Endpoint set); S3CredentialsDir holds the files accessKeyId and
	// secretAccessKey (the mounted backup.s3.existingSecret).
	S3               backup.S3Target
	S3CredentialsDir string
	// Scratch says Dir is scratch space (no backup volume): the snapshot is removed from it after the upload.
	Scratch bool
}

// Validate checks the options.
func (o *BackupOptions) Validate() error {
	if o.InstanceFile == "" || o.PasswordFile == "" || o.Dir == "" || o.CLI == "" {
		return errors.New("--instance-file, --password-file, --dir and --cli are required")
	}
	if o.Retention < 1 {
		return fmt.Errorf("--retention %d: keep at least 1", o.Retention)
	}
	if o.Timeout <= 0 {
		return errors.New("--timeout must be > 0")
	}
	if o.Scratch && o.S3.Endpoint == "" {
		return errors.New("--scratch needs --s3-endpoint (the snapshot must go somewhere)")
	}
	return nil
}

func newBackupCmd() *cobra.Command {
	o := &BackupOptions{}
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "take an RDB snapshot of the instance from a replica into a directory (the backup CronJob)",
		Long: `backup runs in the backup CronJob's pod (charts/valkey backup.enabled). It finds a replica of the instance
whose link to the primary is up (never the primary), runs --cli --rdb against it as the _backup user, checks the
snapshot's RDB header, writes <instance>-<UTC timestamp>.rdb and <same>.rdb.json (engine and version, RDB version,
size, sha256, replication id and offset, start, end, duration) into --dir, and removes the oldest backups of this
instance beyond --retention. A failure logs why, writes the reason to --termination-log and exits 1; the target
is left as it was (no partial file). See internal/podsteps/backup.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			err := o.run(cmd)
			if err != nil {
				writeTermination(o.TerminationLog, "backup failed: "+err.Error())
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.InstanceFile, "instance-file", defaultInstanceFile, "instance descriptor (the nodes)")
	f.StringVar(&o.PasswordFile, "password-file", filepath.Join(contract.MountBackupAuth, contract.KeyPassword), "the _backup user's password")
	f.StringVar(&o.Dir, "dir", "/backup", "target directory (the backup volume)")
	f.IntVar(&o.Retention, "retention", 7, "backups of this instance to keep")
	f.StringVar(&o.CLI, "cli", "valkey-cli", "the engine's command-line client (valkey-cli or redis-cli)")
	f.DurationVar(&o.Timeout, "timeout", 30*time.Second, "bound on finding a replica (the snapshot itself is bounded by the Job's activeDeadlineSeconds)")
	f.StringVar(&o.TerminationLog, "termination-log", "/dev/termination-log", "where a failure's reason (or a success's metadata) is written")
	addS3Flags(f, &o.S3, &o.S3CredentialsDir, "S3-compatible server URL (http:// or https://); empty: no upload", "existing bucket")
	f.BoolVar(&o.Scratch, "scratch", false, "--dir is scratch space: remove the snapshot from it after the upload")
	return cmd
}

// addS3Flags declares the --s3-* flags of the backup and restore commands into t and credsDir; endpoint and
// bucket are the help texts that differ between the two.
func addS3Flags(f *pflag.FlagSet, t *backup.S3Target, credsDir *string, endpoint, bucket string) {
	f.StringVar(&t.Endpoint, "s3-endpoint", "", endpoint)
	f.StringVar(&t.Bucket, "s3-bucket", "", bucket)
	f.StringVar(&t.Prefix, "s3-prefix", "", "object name prefix (a folder)")
	f.StringVar(&t.Region, "s3-region", "", "bucket region")
	f.BoolVar(&t.ForcePathStyle, "s3-force-path-style", false, "address the bucket as <endpoint>/<bucket>")
	f.StringVar(&t.CAFile, "s3-ca-file", "", "PEM bundle verifying an https endpoint")
	f.StringVar(credsDir, "s3-credentials-dir", contract.MountS3Credentials, "directory with the files accessKeyId and secretAccessKey")
}

// s3 reads the credentials and builds the S3 target, or returns nil without --s3-endpoint.
func (o *BackupOptions) s3() (*backup.S3, error) {
	if o.S3.Endpoint == "" {
		return nil, nil
	}
	t := o.S3
	for name, dst := range map[string]*string{"accessKeyId": &t.AccessKeyID, "secretAccessKey": &t.SecretAccessKey} {
		b, err := os.ReadFile(filepath.Join(o.S3CredentialsDir, name))
		if err != nil {
			return nil, fmt.Errorf("backup.s3.existingSecret: key %s: %w", name, err)
		}
		*dst = strings.TrimSpace(string(b))
	}
	return backup.NewS3(t)
}

func (o *BackupOptions) run(cmd *cobra.Command) error {
	log := slog.Default()
	b, err := os.ReadFile(o.InstanceFile)
	if err != nil {
		return fmt.Errorf("read %s: %w", o.InstanceFile, err)
	}
	in, err := spec.ParseInstance(b)
	if err != nil {
		return err
	}
	pw, err := os.ReadFile(o.PasswordFile)
	if err != nil {
		return fmt.Errorf("read the _backup password: %w", err)
	}
	opts := valkey.Options{Username: acl.Backup, Password: strings.TrimSpace(string(pw)), RESP2: true}
	if in.TLS.Enabled {
		return errors.New("backup of a TLS instance is not supported yet (the chart refuses backup.enabled with tls.enabled)")
	}
	ctx := cmd.Context()
	s3, err := o.s3()
	if err == nil && s3 != nil {
		// before the snapshot: a wrong target costs no fork of the replica
		err = s3.Check(ctx)
	}
	if err != nil {
		log.Error("backup failed", "instance", in.Name, "s3", o.S3.Endpoint, "bucket", o.S3.Bucket, "err", err)
		return err
	}
	res, err := backup.Snapshot(ctx, backup.SnapshotOptions{Instance: in.Name, Nodes: in.NodeAddrs(), Client: opts, Dir: o.Dir,
		Retention: o.Retention, CLI: func(args ...string) *exec.Cmd { return exec.CommandContext(ctx, o.CLI, args...) }})
	if err != nil {
		log.Error("backup failed", "instance", in.Name, "dir", o.Dir, "err", err)
		return err
	}
	m := res.Meta
	where := filepath.Join(o.Dir, m.File)
	if s3 != nil {
		if o.Scratch {
			defer os.Remove(filepath.Join(o.Dir, m.File))
			defer os.Remove(filepath.Join(o.Dir, m.File+".json"))
		}
		pruned, err := s3.Upload(ctx, o.Dir, &m, o.Retention)
		if err != nil {
			if !o.Scratch {
				err = fmt.Errorf("%w (the copy on the backup volume, %s, is kept)", err, m.File)
			}
			log.Error("backup upload failed", "instance", in.Name, "s3", o.S3.Endpoint, "bucket", o.S3.Bucket, "key", s3.Key(m.File), "err", err)
			return err
		}
		if o.Scratch {
			where, res.Pruned = "", nil
		}
		res.Pruned = append(res.Pruned, pruned...)
		log.Info("backup uploaded", "instance", in.Name, "s3", o.S3.Endpoint, "bucket", o.S3.Bucket, "key", s3.Key(m.File), "pruned", pruned)
	}
	log.Info("backup taken", "instance", in.Name, "file", where, "node", m.Node, "engine", m.Engine,
		"engineVersion", m.EngineVersion, "rdbVersion", m.RDBVersion, "bytes", m.Size, "sha256", m.SHA256, "replOffset", m.ReplOffset,
		"durationSeconds", m.DurationSeconds, "uploadSeconds", m.UploadSeconds, "pruned", res.Pruned)
	if b, err := json.Marshal(m); err == nil {
		// the instance controller reads it back from the pod's status (backup metrics)
		writeTermination(o.TerminationLog, string(b))
	}
	return nil
}

// RestoreOptions are the flags of `restore`.
type RestoreOptions struct {
	From           string
	DataDir        string
	ConfigTemplate string
	Server         string
	TerminationLog string
	// S3 (S3.Endpoint set) is where the backup is downloaded from (restoreFrom.s3) into the directory of
	// From first; S3CredentialsDir holds the files accessKeyId and secretAccessKey.
	S3               backup.S3Target
	S3CredentialsDir string
}

func newRestoreCmd() *cobra.Command {
	o := &RestoreOptions{}
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "fill an empty data directory with a backup before the server starts (restoreFrom, node 0 only)",
		Long: `restore runs as an init container of node 0 of an instance installed with restoreFrom. When the data
directory is empty and was never restored, it checks the backup (sha256 and size against its metadata file,
the RDB header, the RDB version against what --server reads) and writes it as the RDB file and, with
appendonly on (persistence), as the base of a new AOF, so the server starts with that data and the boot step
sees this node as the one with the newest data (the other nodes start empty and replicate from it). A
directory that holds data is never touched. A refusal writes "start refused: <reason>" to --termination-log
(the instance controller's StartRefused Event) and exits 1.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.From == "" || o.DataDir == "" || o.ConfigTemplate == "" {
				return errors.New("--from, --data-dir and --config-template are required")
			}
			err := o.run(cmd.Context())
			if err != nil {
				slog.Error("restore refused", "from", o.From, "err", err)
				writeTermination(o.TerminationLog, contract.StartRefusedPrefix+err.Error())
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.From, "from", "", "the backup file (on the mounted restore volume)")
	f.StringVar(&o.DataDir, "data-dir", "/data", "the node's data directory")
	f.StringVar(&o.ConfigTemplate, "config-template", defaultConfigTemplate, "the server config (appendonly, dbfilename, appenddirname)")
	f.StringVar(&o.Server, "server", "valkey-server", "the server program (its --version decides which RDB versions it reads)")
	f.StringVar(&o.TerminationLog, "termination-log", "/dev/termination-log", "where a refusal's reason is written")
	addS3Flags(f, &o.S3, &o.S3CredentialsDir, "download --from's file name from this S3-compatible server first (http:// or https://)", "bucket holding the backup")
	return cmd
}

func (o *RestoreOptions) run(ctx context.Context) error {
	conf, err := os.ReadFile(o.ConfigTemplate)
	if err != nil {
		return fmt.Errorf("read %s: %w", o.ConfigTemplate, err)
	}
	files := bootstrap.ParseServerFiles(string(conf))
	if o.S3.Endpoint != "" {
		if why := backup.SkipRestore(o.DataDir, files); why != "" {
			slog.Info("restore skipped", "from", o.From, "reason", why)
			return nil // nothing read from the bucket
		}
		t := o.S3
		for name, dst := range map[string]*string{"accessKeyId": &t.AccessKeyID, "secretAccessKey": &t.SecretAccessKey} {
			b, err := os.ReadFile(filepath.Join(o.S3CredentialsDir, name))
			if err != nil {
				return fmt.Errorf("restoreFrom.s3.existingSecret: key %s: %w", name, err)
			}
			*dst = strings.TrimSpace(string(b))
		}
		s3, err := backup.NewS3(t)
		if err != nil {
			return backup.AsValues(err, "restoreFrom.s3")
		}
		// into the directory of --from (an emptyDir), under temporary names renamed when complete
		if _, err := s3.Download(ctx, filepath.Base(o.From), filepath.Dir(o.From)); err != nil {
			return backup.AsValues(err, "restoreFrom.s3")
		}
		slog.Info("downloaded", "s3", t.Endpoint, "bucket", t.Bucket, "key", s3.Key(filepath.Base(o.From)), "to", o.From)
	}
	version, err := exec.Command(o.Server, "--version").Output()
	if err != nil {
		slog.Warn("restore: server version unknown; the RDB version is left to the server", "server", o.Server, "err", err)
	}
	res, err := backup.Restore(backup.RestoreOptions{From: o.From, DataDir: o.DataDir, Files: files,
		ServerVersion: string(version)})
	if err != nil {
		return fmt.Errorf("restoreFrom: %w", err)
	}
	if res.Skipped != "" {
		slog.Info("restore skipped", "from", o.From, "reason", res.Skipped)
		return nil
	}
	slog.Info("restored", "from", o.From, "dataDir", o.DataDir, "engine", res.Meta.Engine, "engineVersion", res.Meta.EngineVersion,
		"bytes", res.Meta.Size, "sha256", res.Meta.SHA256, "replOffset", res.Meta.ReplOffset)
	return nil
}

// writeTermination writes msg (at most 4 KiB, the kubelet's limit) to path; errors are ignored (a missing
// termination log must not hide the failure itself).
func writeTermination(path, msg string) {
	if path == "" {
		return
	}
	if len(msg) > 4000 {
		msg = msg[:4000]
	}
	_ = os.WriteFile(path, []byte(msg), 0o644)
}
