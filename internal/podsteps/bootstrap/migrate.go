package bootstrap

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/spec"
	"github.com/valkey-ha/valkey-ha/internal/valkeyapi/valkey"
)

// MigrateFrom is where a migrating instance takes its data from (charts/valkey migrateFrom; README
// "Migration", internal/podsteps/migrate): node 0 replicates from this primary outside the chart, authenticated as User
// (empty: the default user) with the password in PasswordFile; the other nodes replicate from node 0.
type MigrateFrom struct {
	Host         string
	Port         int
	User         string
	PasswordFile string
}

// fenceMinReplicas is the min-replicas-to-write that migrate.Switch sets on the source to fence it.
const fenceMinReplicas = "2147483647"

// SourceView is what node 0's boot step learned from the source of a migration.
type SourceView struct {
	Host string
	Port int
	// Err is set when the source could not be asked; Primary when it answered as a primary; Fenced when its
	// min-replicas-to-write is the switch's fence (the switch ran: the source is no longer followed).
	Err     error
	Primary bool
	Fenced  bool
}

// askSource reads the source's role and fence (INFO replication, CONFIG GET min-replicas-to-write).
func askSource(ctx context.Context, m MigrateFrom, o valkey.Options) SourceView {
	v := SourceView{Host: m.Host, Port: m.Port}
	ctx, cancel := context.WithTimeout(ctx, 3*o.DialTimeout)
	defer cancel()
	c, err := valkey.Dial(ctx, net.JoinHostPort(m.Host, strconv.Itoa(m.Port)), o)
	if err != nil {
		v.Err = err
		return v
	}
	defer c.Close()
	r, err := c.InfoReplication(ctx)
	if err != nil {
		v.Err = err
		return v
	}
	cfg, err := c.ConfigGet(ctx, "min-replicas-to-write")
	if err != nil {
		v.Err = err
		return v
	}
	v.Primary, v.Fenced = r.Role == valkey.RolePrimary, cfg["min-replicas-to-write"] == fenceMinReplicas
	return v
}

// planMigrate is the boot step of a migrating instance (Observation.Migrating). It decides only while the
// migration runs: no Sentinel knows the monitor, no peer reports primary and the source is not fenced (after
// the switch, one of these holds and the usual rules decide). Then node 0 follows the source while it
// answers as a primary, and waits otherwise (it never starts as a primary on its own: that would abandon the
// migration with whatever it holds); the other nodes follow node 0 once it follows the source, and wait
// until then. ok is false when the usual rules decide.
func planMigrate(o Observation) (Decision, bool) {
	for _, a := range o.Sentinels {
		if a.Err == nil && a.Found {
			return Decision{}, false
		}
	}
	in := spec.Instance{Port: o.Port}
	var node0 *Peer
	for i := range o.Peers {
		p := &o.Peers[i]
		if p.Reachable && p.Repl.Role == valkey.RolePrimary {
			return Decision{}, false
		}
		if p.Node.Index == 0 {
			node0 = p
		}
	}
	src := o.Source
	if o.Self.Index == 0 {
		addr := net.JoinHostPort(src.Host, strconv.Itoa(src.Port))
		switch {
		case src.Fenced:
			return Decision{}, false
		case src.Err != nil:
			return Decision{Kind: Wait, Reason: fmt.Sprintf("migrateFrom: the source %s does not answer (%v): node 0 of a "+
				"migrating instance only follows it, never starts as primary on its own", addr, src.Err)}, true
		case !src.Primary:
			return Decision{Kind: Wait, Reason: fmt.Sprintf("migrateFrom: the source %s is not a primary: point "+
				"migrateFrom at the other chart's primary", addr)}, true
		}
		return Decision{Kind: StartReplica, PrimaryHost: src.Host, PrimaryPort: src.Port, Migrating: true,
			Reason: fmt.Sprintf("migrateFrom: node 0 follows the source %s", addr)}, true
	}
	if node0 != nil && node0.Reachable && node0.Repl.Role == valkey.RoleReplica &&
		strings.EqualFold(node0.Repl.PrimaryHost, src.Host) && node0.Repl.PrimaryPort == src.Port {
		return Decision{Kind: StartReplica, PrimaryHost: node0.Node.Host, PrimaryPort: in.PortOf(node0.Node),
			Reason: fmt.Sprintf("migrateFrom: node 0 follows the source %s:%d; following node 0", src.Host, src.Port)}, true
	}
	return Decision{Kind: Wait, Reason: "migrateFrom: waiting for node 0 to follow the source"}, true
}

// renderMigrateAuth appends node 0's credentials towards the source of a migration to a rendered config: the
// later masteruser/masterauth lines win. With an empty user, masteruser is the default user. The switch
// (migrate.Switch) sets the instance's own _replication credentials back at run time; the next boot writes
// them anyway.
func renderMigrateAuth(text, user, password string) string {
	if user == "" {
		user = "default"
	}
	return text + "# migrateFrom: node 0 authenticates to the source of the migration\n" +
		fmt.Sprintf("masteruser %s\nmasterauth %s\n", quoteConf(user), quoteConf(password))
}
