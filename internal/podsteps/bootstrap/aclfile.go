package bootstrap

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/acl"
)

// RenderRuntimeACL returns the ACL file a node starting at now must load: the default user off, then every
// user of users.json with only the passwords still valid at now (a user whose every password expired is off).
// F-acl's users.acl was written when the credentials step last ran and keeps a rotated password's hash until
// it runs again; starting from it after previousValidUntil would accept the revoked password until the
// controller's next sync, or forever without a controller. A user acl.SplitUsers refuses is left
// out, as the live sync leaves it out (the controller reports it, Event UsersRefused): one bad user never keeps
// a node from starting nor costs the others their access.
func RenderRuntimeACL(usersJSON []byte, now time.Time) (string, error) {
	users, _, err := acl.SplitUsers(usersJSON)
	if err != nil {
		return "", err
	}
	return acl.RenderFile(users, now)
}

// rewriteACLFile looks for the template's aclfile directive; when users.json sits next to that file, it
// writes RenderRuntimeACL's output, the node-local acl.PreStop user and the extra lines to users.acl beside
// configOut and returns text with the aclfile directive pointing there. Without an aclfile or a users.json,
// text is returned unchanged.
func rewriteACLFile(text, configOut string, now time.Time, extra ...string) (string, error) {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) != 2 || f[0] != "aclfile" {
			continue
		}
		src := strings.Trim(f[1], `"`)
		b, err := os.ReadFile(filepath.Join(filepath.Dir(src), contract.KeyUsers))
		if os.IsNotExist(err) {
			return text, nil
		}
		if err != nil {
			return "", fmt.Errorf("read %s next to aclfile %s: %w", contract.KeyUsers, src, err)
		}
		content, err := RenderRuntimeACL(b, now)
		if err != nil {
			return "", fmt.Errorf("runtime ACL file from %s: %w", contract.KeyUsers, err)
		}
		line, err := preStopUser(filepath.Dir(configOut))
		if err != nil {
			return "", err
		}
		content += line + "\n"
		for _, l := range extra {
			content += l + "\n"
		}
		out := filepath.Join(filepath.Dir(configOut), contract.KeyACLFile)
		if err := writeAtomic(out, content); err != nil {
			return "", err
		}
		lines[i] = "aclfile " + out
		return strings.Join(lines, "\n"), nil
	}
	return text, nil
}

// PreStopPasswordFile is the file, next to the runtime config, that holds the node-local password of
// acl.PreStop (read by `valkey-sentinel-ctl prestop`).
const PreStopPasswordFile = "_prestop"

// preStopUser gives acl.PreStop a fresh random password, writes it to PreStopPasswordFile in dir (mode
// 0600) and returns the user's ACL line for this node's runtime ACL file.
func preStopUser(dir string) (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random password for %s: %w", acl.PreStop, err)
	}
	pw := hex.EncodeToString(b)
	if err := writeAtomic(filepath.Join(dir, PreStopPasswordFile), pw); err != nil {
		return "", err
	}
	return acl.RenderLine(acl.PreStop, PreStopRules(pw)), nil
}

// PreStopRules are the ACL rules of acl.PreStop with password pw (clean slate first).
func PreStopRules(pw string) []string {
	return append([]string{"on", "resetpass", "#" + acl.HashPassword(pw), "resetkeys", "resetchannels", "nocommands"}, acl.PreStopUser.Rules()...)
}

func writeAtomic(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", path, err)
	}
	return nil
}
