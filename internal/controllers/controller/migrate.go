package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/podsteps/migrate"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// MigrateOptions make the instance controller run a migration from a primary outside the chart (charts/valkey
// migrateFrom; README "Migration"; internal/podsteps/migrate). Only with --instance (one instance per controller).
type MigrateOptions struct {
	// Host and Port are the source; User its ACL user (empty: default), PasswordFile the file with its password
	// (the user's Secret, mounted).
	Host         string
	Port         int
	User         string
	PasswordFile string
	// Switch is migrateFrom.switch: switch over once node 0 is caught up.
	Switch bool
}

// The wait between two attempts of a migration switch that failed: each attempt may hold the source's writes for
// its pause budget (5 s), so a switch that cannot complete (node 0 not catching up, a right missing) is not
// tried every pass. The wait doubles from MinSwitchBackoff to MaxSwitchBackoff.
const (
	MinSwitchBackoff = 10 * time.Second
	MaxSwitchBackoff = 5 * time.Minute
)

// closeMigrations closes the migration connections of every instance (Run's end).
func (c *InstanceController) closeMigrations() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.state {
		if st.migrateObs != nil {
			st.migrateObs.Close()
		}
	}
}

// migrating runs the migration part of a pass. While the migration runs (the plan says anything but
// Switched), the pass takes no topology step, sets no role label and rolls nothing: node 0 follows a primary
// that is not a node, which every repair would "fix". It reports the migration's state (Event once per change
// of state, the message in the status) and, when the switch is asked and node 0 caught up, switches. It
// returns true while the migration holds the rest of the pass.
func (c *InstanceController) migrating(ctx context.Context, key types.NamespacedName, desc *corev1.ConfigMap, in spec.Instance, mem *instanceMemory) bool {
	m := c.opts.Migrate
	if m == nil || len(in.Nodes) == 0 {
		return false
	}
	pw, err := os.ReadFile(m.PasswordFile)
	cfg := migrate.Config{SourceHost: m.Host, SourcePort: m.Port,
		Source:    valkey.Options{Username: m.User, Password: strings.TrimSpace(string(pw)), DialTimeout: c.opts.DialTimeout, CommandTimeout: c.opts.CommandTimeout},
		Node0Addr: in.Addr(in.Nodes[0]), Node0: c.opOptions(in, mem)}
	var d migrate.Decision
	if err != nil {
		d = migrate.Decision{State: migrate.Refused, Behind: -1, Message: "migrateFrom: the source's password file: " + err.Error()}
	} else {
		// one kept connection to the source across passes (another team's primary: no dial per pass)
		if mem.migrateObs == nil {
			mem.migrateObs = migrate.NewObserver()
		}
		d = migrate.Plan(mem.migrateObs.Observe(ctx, cfg, m.Switch))
	}
	mem.migration = d.Message
	if d.State == migrate.Switched {
		if c.reported.changed(key.String()+"/migration", string(d.State)) {
			c.recorder.Event(desc, corev1.EventTypeNormal, "MigrationSwitched", d.Message+"; remove migrateFrom from the values")
		}
		return false
	}
	typ := corev1.EventTypeNormal
	if d.State == migrate.Refused {
		typ = corev1.EventTypeWarning
	}
	if c.reported.changed(key.String()+"/migration", string(d.State)) {
		c.recorder.Event(desc, typ, "Migrating", d.Message)
	}
	if d.State != migrate.Ready {
		return true
	}
	if time.Now().Before(mem.switchRetryAt) {
		// a failed switch paused the source's writes (up to its budget) or was refused by it: not every pass
		mem.migration = mem.switchFailed
		return true
	}
	// node 0's own masteruser/masterauth come back from its first-sync guard once it is primary (_operator has no
	// CONFIG SET), or at its next boot
	res, err := migrate.Switch(ctx, cfg, c.log.With("instance", in.Name))
	if err != nil {
		var se *migrate.Error
		reason := migrate.Reason("")
		if errors.As(err, &se) {
			reason = se.Reason
		}
		mem.switchBackoff = min(max(2*mem.switchBackoff, MinSwitchBackoff), MaxSwitchBackoff)
		mem.switchRetryAt = time.Now().Add(mem.switchBackoff)
		// an absolute time: the status is rewritten only when its text changes
		mem.switchFailed = fmt.Sprintf("migrateFrom: switch failed: %v; next attempt at %s", err, mem.switchRetryAt.UTC().Format(time.RFC3339))
		c.recorder.Event(desc, corev1.EventTypeWarning, "MigrationSwitchFailed", err.Error())
		mem.migration = mem.switchFailed
		c.log.Warn("migration switch failed", "instance", in.Name, "reason", string(reason), "retryIn", mem.switchBackoff.String(), "err", err)
		return true
	}
	mem.switchBackoff, mem.switchRetryAt, mem.switchFailed = 0, time.Time{}, ""
	c.log.Info("migration switched", "instance", in.Name, "offset", res.Offset, "paused", res.Paused.String())
	return true // observe again at once: node 0 is the primary now
}
