package backup

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Target is an S3-compatible bucket the backups go to (charts/valkey backup.s3.*). The objects are the same
// pair as on a volume: <Prefix><instance>-<UTC timestamp>.rdb, then <same>.rdb.json. The metadata object is
// written last and is what makes a backup count: a snapshot whose upload failed half way is removed, and one
// left without its metadata (the Job killed between the two uploads) is never listed as a backup.
type S3Target struct {
	// Endpoint is the server's URL, http:// or https://, host and optional port, no path.
	Endpoint string
	// Bucket must exist (the backup never creates one); Prefix is prepended to every object name ("" or a
	// folder such as "valkey/cache/"; a missing trailing "/" is added).
	Bucket, Prefix string
	// Region is the bucket's region ("" lets the client ask the server; most S3-compatible servers take any).
	Region string
	// AccessKeyID and SecretAccessKey sign the requests (AWS signature V4).
	AccessKeyID, SecretAccessKey string
	// ForcePathStyle addresses the bucket as <endpoint>/<bucket> rather than <bucket>.<endpoint> (most
	// self-hosted servers need it).
	ForcePathStyle bool
	// CAFile is a PEM bundle that verifies an https endpoint ("" = the system roots).
	CAFile string
	// Timeout bounds each request (0 = 60 s); the upload of the snapshot itself is bounded by the caller's
	// context (the Job's activeDeadlineSeconds).
	Timeout time.Duration
}

// AsValues rewrites the values named in err ("backup.s3.<field>", as every error of this file says) to
// values + ".<field>": the restore step reports restoreFrom.s3.<field>. The error still wraps err.
func AsValues(err error, values string) error {
	if err == nil || !strings.Contains(err.Error(), "backup.s3.") {
		return err
	}
	return renamed{msg: strings.ReplaceAll(err.Error(), "backup.s3.", values+"."), err: err}
}

type renamed struct {
	msg string
	err error
}

func (r renamed) Error() string { return r.msg }
func (r renamed) Unwrap() error { return r.err }

// S3 is a connected S3Target (NewS3).
type S3 struct {
	t      S3Target
	prefix string
	c      *minio.Client
}

// NewS3 checks the target's fields and builds its client; it sends nothing. Errors name the value to fix.
func NewS3(t S3Target) (*S3, error) {
	u, err := url.Parse(t.Endpoint)
	switch {
	case t.Endpoint == "":
		return nil, errors.New("backup.s3.endpoint is empty: set the server's URL (https://host:port)")
	case !strings.HasPrefix(t.Endpoint, "http://") && !strings.HasPrefix(t.Endpoint, "https://"):
		return nil, fmt.Errorf("backup.s3.endpoint %q: the URL must start with http:// or https://", t.Endpoint)
	case err != nil:
		return nil, fmt.Errorf("backup.s3.endpoint %q: %w", t.Endpoint, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("backup.s3.endpoint %q: the URL must start with http:// or https://", t.Endpoint)
	case u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil:
		return nil, fmt.Errorf("backup.s3.endpoint %q: only scheme, host and port (the bucket goes in backup.s3.bucket)", t.Endpoint)
	case t.Bucket == "":
		return nil, errors.New("backup.s3.bucket is empty: name an existing bucket")
	case t.AccessKeyID == "" || t.SecretAccessKey == "":
		return nil, errors.New("backup.s3.existingSecret: accessKeyId or secretAccessKey is empty")
	case strings.HasPrefix(t.Prefix, "/"):
		return nil, fmt.Errorf("backup.s3.prefix %q: no leading /", t.Prefix)
	}
	tr, err := minio.DefaultTransport(u.Scheme == "https")
	if err != nil {
		return nil, err
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("backup.s3.caSecret: read %s: %w", t.CAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("backup.s3.caSecret: %s holds no PEM certificate", t.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if t.Timeout <= 0 {
		t.Timeout = 60 * time.Second
	}
	lookup := minio.BucketLookupAuto
	if t.ForcePathStyle {
		lookup = minio.BucketLookupPath
	}
	c, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(t.AccessKeyID, t.SecretAccessKey, ""),
		Secure: u.Scheme == "https", Transport: tr, Region: t.Region, BucketLookup: lookup, MaxRetries: 3})
	if err != nil {
		return nil, fmt.Errorf("backup.s3.endpoint %q: %w", t.Endpoint, err)
	}
	prefix := t.Prefix
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &S3{t: t, prefix: prefix, c: c}, nil
}

// Key is the object name of file (a snapshot or metadata file name) under the target's prefix.
func (s *S3) Key(file string) string { return s.prefix + file }

// Check lists at most one object under the prefix (ListObjectsV2): the bucket exists and these credentials
// may list it (the retention needs that too). A HEAD request would not do: its error has no body, and some
// servers answer an unknown access key with 404. It is run before a snapshot, so a wrong target costs no fork
// of the replica. Errors name the value to fix: the endpoint (not reachable, TLS), the credentials (refused),
// the bucket (missing).
func (s *S3) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.t.Timeout)
	defer cancel()
	for o := range s.c.ListObjects(ctx, s.t.Bucket, minio.ListObjectsOptions{Prefix: s.prefix, MaxKeys: 1}) {
		if o.Err != nil {
			return s.explain("ListObjects "+s.t.Bucket, o.Err)
		}
		cancel() // one is enough
	}
	return nil
}

// explain turns a client error into one naming the value to fix. Refused credentials are the standard codes,
// any 401 or 403, or a code about the user (versitygw answers an unknown access key with 404
// XAdminUserNotFound).
func (s *S3) explain(op string, err error) error {
	r := minio.ToErrorResponse(err)
	switch {
	case r.Code == "InvalidAccessKeyId" || r.Code == "SignatureDoesNotMatch" || r.Code == "AccessDenied" ||
		r.Code == "InvalidToken" || r.Code == "ExpiredToken" || strings.Contains(r.Code, "UserNotFound") ||
		r.StatusCode == 401 || r.StatusCode == 403:
		return fmt.Errorf("backup.s3.existingSecret: %s at %s refused the credentials (%s: %s): check accessKeyId and secretAccessKey and the key's rights on the bucket",
			op, s.t.Endpoint, r.Code, r.Message)
	case r.Code == "NoSuchBucket":
		return fmt.Errorf("backup.s3.bucket: bucket %q does not exist at %s: create it (the backup never creates one)", s.t.Bucket, s.t.Endpoint)
	case r.Code == "":
		return fmt.Errorf("backup.s3.endpoint: %s at %s: %w", op, s.t.Endpoint, err)
	}
	return fmt.Errorf("%s at %s: %w", op, s.t.Endpoint, err)
}

// Upload puts the snapshot dir/m.File and then its metadata as objects (the metadata last: it marks the backup
// complete), then removes the oldest complete backups of m.Instance beyond keep. It sets m.UploadSeconds (the
// snapshot object's upload) before the metadata is written, so the stored metadata carries it. A failed
// upload removes the snapshot object it may have left and prunes nothing; it returns the pruned snapshot names.
func (s *S3) Upload(ctx context.Context, dir string, m *Meta, keep int) ([]string, error) {
	if keep < 1 {
		return nil, fmt.Errorf("backup.retention: %d, keep at least 1", keep)
	}
	key := s.Key(m.File)
	// one part in flight (16 MiB for snapshots up to 160 GB): the Job's memory does not grow with the dataset
	start := time.Now()
	if _, err := s.c.FPutObject(ctx, s.t.Bucket, key, filepath.Join(dir, m.File),
		minio.PutObjectOptions{ContentType: "application/octet-stream", NumThreads: 1}); err != nil {
		s.remove(key)
		return nil, s.explain("PutObject "+key, err)
	}
	m.UploadSeconds = time.Since(start).Seconds()
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		s.remove(key)
		return nil, err
	}
	b = append(b, '\n')
	if _, err := s.c.PutObject(ctx, s.t.Bucket, key+".json", strings.NewReader(string(b)), int64(len(b)),
		minio.PutObjectOptions{ContentType: "application/json"}); err != nil {
		s.remove(key)
		return nil, s.explain("PutObject "+key+".json", err)
	}
	return s.Prune(ctx, m.Instance, keep)
}

// remove deletes key on a best-effort basis (the cleanup of a failed upload, with its own deadline: the
// caller's context may be the one that ran out).
func (s *S3) remove(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), s.t.Timeout)
	defer cancel()
	_ = s.c.RemoveObject(ctx, s.t.Bucket, key, minio.RemoveObjectOptions{})
}

// Backups lists the complete backups of instance under the prefix (a snapshot object with its metadata object),
// oldest first, and the snapshot objects without metadata (left-overs of an upload that was cut off).
func (s *S3) Backups(ctx context.Context, instance string) (complete, orphans []string, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.t.Timeout)
	defer cancel()
	names := map[string]bool{}
	for o := range s.c.ListObjects(ctx, s.t.Bucket, minio.ListObjectsOptions{Prefix: s.prefix + instance + "-"}) {
		if o.Err != nil {
			return nil, nil, s.explain("ListObjects "+s.prefix, o.Err)
		}
		names[strings.TrimPrefix(o.Key, s.prefix)] = true
	}
	for n := range names {
		if !isBackupName(n, instance) {
			continue
		}
		if names[n+".json"] {
			complete = append(complete, n)
		} else {
			orphans = append(orphans, n)
		}
	}
	sort.Strings(complete)
	sort.Strings(orphans)
	return complete, orphans, nil
}

// Prune removes the oldest complete backups of instance beyond keep (the metadata object first, so a backup
// cut off half way is no longer listed), and the snapshot objects without metadata older than the newest
// complete backup. It returns the snapshot names removed.
func (s *S3) Prune(ctx context.Context, instance string, keep int) ([]string, error) {
	complete, orphans, err := s.Backups(ctx, instance)
	if err != nil {
		return nil, err
	}
	var removed []string
	del := func(key string) error {
		if err := s.c.RemoveObject(ctx, s.t.Bucket, key, minio.RemoveObjectOptions{}); err != nil {
			return s.explain("DeleteObject "+key, err)
		}
		return nil
	}
	for len(complete) > keep {
		n := complete[0]
		complete = complete[1:]
		if err := del(s.Key(n + ".json")); err != nil {
			return removed, err
		}
		if err := del(s.Key(n)); err != nil {
			return removed, err
		}
		removed = append(removed, n)
	}
	for _, n := range orphans {
		if len(complete) > 0 && n < complete[len(complete)-1] {
			if err := del(s.Key(n)); err != nil {
				return removed, err
			}
			removed = append(removed, n)
		}
	}
	return removed, nil
}

// Download copies the backup file and its metadata from the bucket into dir (restoreFrom.s3), under
// temporary names renamed when complete; it returns the local path of the snapshot. A backup without its
// metadata object is refused (an upload that was cut off).
func (s *S3) Download(ctx context.Context, file, dir string) (string, error) {
	if file == "" || strings.Contains(file, "/") {
		return "", fmt.Errorf("restoreFrom.file %q: a backup file name (no directories)", file)
	}
	dst := filepath.Join(dir, file)
	for _, name := range []string{file + ".json", file} {
		tmp := filepath.Join(dir, "."+name+".partial")
		if err := s.c.FGetObject(ctx, s.t.Bucket, s.Key(name), tmp, minio.GetObjectOptions{}); err != nil {
			os.Remove(tmp)
			if r := minio.ToErrorResponse(err); r.Code == "NoSuchKey" {
				return "", fmt.Errorf("restoreFrom.file: %s is not in bucket %q at %s (a backup is complete only with its .json)", s.Key(name), s.t.Bucket, s.t.Endpoint)
			}
			return "", s.explain("GetObject "+s.Key(name), err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			return "", err
		}
	}
	return dst, nil
}

// isBackupName reports whether n is <instance>-<UTC timestamp>.rdb.
func isBackupName(n, instance string) bool {
	rest, ok := strings.CutPrefix(n, instance+"-")
	if !ok || !strings.HasSuffix(n, ".rdb") || len(rest) != len("20060102T150405Z.rdb") {
		return false
	}
	_, err := time.Parse("20060102T150405Z", strings.TrimSuffix(rest, ".rdb"))
	return err == nil
}
