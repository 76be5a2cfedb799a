package valkey

import (
	"bufio"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrMalformed is wrapped by every parser error: the reply did not have the documented shape.
var ErrMalformed = errors.New("malformed reply")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// ParseInfo splits the text of an INFO reply into its "field:value" pairs. Section headers ("# Replication")
// and blank lines are skipped; a later duplicate field wins. Lines without a colon are an error, because INFO
// never sends them (Valkey docs, "INFO").
func ParseInfo(text string) (map[string]string, error) {
	fields := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || k == "" {
			return nil, malformed("INFO line %q has no field name", truncate(line))
		}
		fields[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, malformed("INFO: %v", err)
	}
	return fields, nil
}

// ParseKV parses the comma-separated "k=v,k=v" values INFO uses for "slave0:" and "master0:" lines.
func ParseKV(s string) (map[string]string, error) {
	out := map[string]string{}
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || k == "" {
			return nil, malformed("expected k=v, got %q", truncate(part))
		}
		out[k] = v
	}
	return out, nil
}

// ParseReplication turns the fields of INFO replication (see ParseInfo) into a Replication. The role is
// translated at this edge: "master" becomes RolePrimary and "slave" (or "replica") RoleReplica.
// It returns an error wrapping ErrMalformed when role is missing or unknown or a numeric field is not a number.
func ParseReplication(fields map[string]string) (Replication, error) {
	var r Replication
	role, err := parseRoleWord(fields["role"])
	if err != nil {
		return r, err
	}
	r.Role = role
	if r.MasterReplOffset, err = intField(fields, "master_repl_offset", 0); err != nil {
		return r, err
	}
	r.ReplID = fields["master_replid"]
	r.FailoverState = fields["master_failover_state"]
	n, err := intField(fields, "connected_slaves", 0)
	if err != nil {
		return r, err
	}
	for i := 0; i < int(n); i++ {
		raw, ok := fields["slave"+strconv.Itoa(i)]
		if !ok {
			return r, malformed("connected_slaves:%d but slave%d missing", n, i)
		}
		kv, err := ParseKV(raw)
		if err != nil {
			return r, fmt.Errorf("slave%d: %w", i, err)
		}
		var rep ConnectedReplica
		rep.Host = kv["ip"]
		if rep.Port, err = atoiField(kv, "port"); err != nil {
			return r, fmt.Errorf("slave%d: %w", i, err)
		}
		rep.State = kv["state"]
		if rep.Offset, err = intField(kv, "offset", 0); err != nil {
			return r, fmt.Errorf("slave%d: %w", i, err)
		}
		if rep.LagSeconds, err = intField(kv, "lag", 0); err != nil {
			return r, fmt.Errorf("slave%d: %w", i, err)
		}
		r.Replicas = append(r.Replicas, rep)
	}
	if r.Role == RoleReplica {
		r.PrimaryHost = fields["master_host"]
		if r.PrimaryPort, err = atoiField(fields, "master_port"); err != nil {
			return r, err
		}
		r.LinkUp = fields["master_link_status"] == "up"
		if r.LastIOSecondsAgo, err = intField(fields, "master_last_io_seconds_ago", -1); err != nil {
			return r, err
		}
		if r.LinkDownSinceSeconds, err = intField(fields, "master_link_down_since_seconds", 0); err != nil {
			return r, err
		}
		r.SyncInProgress = fields["master_sync_in_progress"] == "1"
		if r.ReplicaReplOffset, err = intField(fields, "slave_repl_offset", 0); err != nil {
			return r, err
		}
		if r.ReplicaPriority, err = intField(fields, "slave_priority", 100); err != nil {
			return r, err
		}
		r.ReplicaReadOnly = fields["slave_read_only"] != "0"
	}
	return r, nil
}

// ParseKeyspace sums keys=N over the "dbN:" fields of INFO keyspace.
func ParseKeyspace(fields map[string]string) (int64, error) {
	var total int64
	for k, v := range fields {
		if !strings.HasPrefix(k, "db") {
			continue
		}
		kv, err := ParseKV(v)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", k, err)
		}
		n, err := intField(kv, "keys", 0)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", k, err)
		}
		total += n
	}
	return total, nil
}

// ParseRole decodes a ROLE reply (Valkey docs, "ROLE"): for a primary ["master", offset, [[host, port, offset],
// ...]], for a replica ["slave", host, port, state, offset], for a Sentinel ["sentinel", [names...]].
// Values arrive as produced by valkey-go's ToAny (string, int64, []any).
func ParseRole(reply []any) (RoleInfo, error) {
	var ri RoleInfo
	if len(reply) == 0 {
		return ri, malformed("ROLE: empty reply")
	}
	word, ok := reply[0].(string)
	if !ok {
		return ri, malformed("ROLE: first element is %T", reply[0])
	}
	switch word {
	case "master", "primary":
		ri.Role = RolePrimary
		if len(reply) < 3 {
			return ri, malformed("ROLE master: %d elements", len(reply))
		}
		off, err := anyInt(reply[1])
		if err != nil {
			return ri, fmt.Errorf("ROLE master offset: %w", err)
		}
		ri.Offset = off
		reps, ok := reply[2].([]any)
		if !ok && reply[2] != nil {
			return ri, malformed("ROLE master replicas is %T", reply[2])
		}
		for _, r := range reps {
			triple, ok := r.([]any)
			if !ok || len(triple) < 3 {
				return ri, malformed("ROLE master replica entry %v", r)
			}
			host, _ := triple[0].(string)
			port, err := anyInt(triple[1])
			if err != nil {
				return ri, fmt.Errorf("ROLE replica port: %w", err)
			}
			off, err := anyInt(triple[2])
			if err != nil {
				return ri, fmt.Errorf("ROLE replica offset: %w", err)
			}
			ri.Replicas = append(ri.Replicas, ConnectedReplica{Host: host, Port: int(port), Offset: off})
		}
	case "slave", "replica":
		ri.Role = RoleReplica
		if len(reply) < 5 {
			return ri, malformed("ROLE slave: %d elements", len(reply))
		}
		ri.PrimaryHost, _ = reply[1].(string)
		port, err := anyInt(reply[2])
		if err != nil {
			return ri, fmt.Errorf("ROLE slave port: %w", err)
		}
		ri.PrimaryPort = int(port)
		ri.State, _ = reply[3].(string)
		if ri.Offset, err = anyInt(reply[4]); err != nil {
			return ri, fmt.Errorf("ROLE slave offset: %w", err)
		}
	case "sentinel":
		ri.Role = RoleSentinel
		if len(reply) > 1 {
			names, _ := reply[1].([]any)
			for _, n := range names {
				if s, ok := n.(string); ok {
					ri.Monitors = append(ri.Monitors, s)
				}
			}
		}
	default:
		return ri, malformed("ROLE: unknown role %q", truncate(word))
	}
	return ri, nil
}

// PairsToMap turns a flat [k1, v1, k2, v2, ...] reply (RESP2) or a map reply (RESP3) into a map of strings.
// Integer values are formatted in base 10. Nested values are an error.
func PairsToMap(v any) (map[string]string, error) {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]string, len(t))
		for k, val := range t {
			s, err := scalarString(val)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", truncate(k), err)
			}
			out[k] = s
		}
		return out, nil
	case []any:
		if len(t)%2 != 0 {
			return nil, malformed("odd number of elements (%d) in a field list", len(t))
		}
		out := make(map[string]string, len(t)/2)
		for i := 0; i < len(t); i += 2 {
			k, err := scalarString(t[i])
			if err != nil {
				return nil, fmt.Errorf("field name %d: %w", i/2, err)
			}
			val, err := scalarString(t[i+1])
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", truncate(k), err)
			}
			out[k] = val
		}
		return out, nil
	default:
		return nil, malformed("expected a field list, got %T", v)
	}
}

// ParseMonitor decodes one entry of SENTINEL MASTERS or the reply of SENTINEL MASTER <name> (Sentinel docs,
// "Sentinel commands"). The fields name, ip, port, flags and quorum are required.
func ParseMonitor(fields map[string]string) (Monitor, error) {
	var m Monitor
	m.Name = fields["name"]
	if m.Name == "" {
		return m, malformed("monitor without a name")
	}
	m.Host = fields["ip"]
	var err error
	if m.Port, err = atoiField(fields, "port"); err != nil {
		return m, fmt.Errorf("monitor %s: %w", m.Name, err)
	}
	if _, ok := fields["flags"]; !ok {
		return m, malformed("monitor %s without flags", m.Name)
	}
	m.Flags = splitFlags(fields["flags"])
	m.RunID = fields["runid"]
	q, err := intField(fields, "quorum", -1)
	if err != nil || q < 0 {
		return m, malformed("monitor %s: quorum %q", m.Name, fields["quorum"])
	}
	m.Quorum = int(q)
	for _, f := range []struct {
		key string
		dst *int64
	}{
		{"num-slaves", &m.NumReplicas},
		{"num-other-sentinels", &m.NumOtherSentinels},
		{"down-after-milliseconds", &m.DownAfterMs},
		{"failover-timeout", &m.FailoverTimeoutMs},
		{"parallel-syncs", &m.ParallelSyncs},
		{"config-epoch", &m.ConfigEpoch},
	} {
		if *f.dst, err = intField(fields, f.key, 0); err != nil {
			return m, fmt.Errorf("monitor %s: %w", m.Name, err)
		}
	}
	m.FailoverState = fields["failover-state"]
	if m.FailoverState == "" {
		m.FailoverState = "none"
	}
	m.Fields = fields
	return m, nil
}

// ParseSentinelReplica decodes one entry of SENTINEL REPLICAS <name>.
func ParseSentinelReplica(fields map[string]string) (SentinelReplica, error) {
	var r SentinelReplica
	r.Host = fields["ip"]
	if r.Host == "" {
		return r, malformed("replica entry without ip")
	}
	var err error
	if r.Port, err = atoiField(fields, "port"); err != nil {
		return r, err
	}
	r.Flags = splitFlags(fields["flags"])
	r.RunID = fields["runid"]
	r.PrimaryLinkUp = fields["master-link-status"] == "ok"
	r.PrimaryHost = fields["master-host"]
	if r.ReplOffset, err = intField(fields, "slave-repl-offset", 0); err != nil {
		return r, err
	}
	if r.Priority, err = intField(fields, "slave-priority", 100); err != nil {
		return r, err
	}
	return r, nil
}

// ParseSentinelPeer decodes one entry of SENTINEL SENTINELS <name>.
func ParseSentinelPeer(fields map[string]string) (SentinelPeer, error) {
	var p SentinelPeer
	p.Host = fields["ip"]
	if p.Host == "" {
		return p, malformed("sentinel entry without ip")
	}
	var err error
	if p.Port, err = atoiField(fields, "port"); err != nil {
		return p, err
	}
	p.RunID = fields["runid"]
	p.Flags = splitFlags(fields["flags"])
	return p, nil
}

// ParseCKQuorum classifies the reply of SENTINEL CKQUORUM: a status line starting with "OK " means the quorum
// and the majority needed to authorize a failover are reachable; an error reply starting with "NOQUORUM" means
// they are not. Any other error text (for example "ERR No such master with that name") is returned as an error.
func ParseCKQuorum(status string, replyErr error) (Quorum, error) {
	if replyErr == nil {
		if !strings.HasPrefix(status, "OK") {
			return Quorum{}, malformed("CKQUORUM: %q", truncate(status))
		}
		return Quorum{OK: true, Message: status, Usable: leadingInt(strings.TrimPrefix(status, "OK "))}, nil
	}
	msg := replyErr.Error()
	if strings.HasPrefix(msg, "NOQUORUM") {
		return Quorum{OK: false, Message: msg, Usable: leadingInt(strings.TrimPrefix(msg, "NOQUORUM "))}, nil
	}
	return Quorum{}, replyErr
}

// ParseSentinelInfo decodes INFO sentinel: the global counters and one MonitorSummary per "masterN:" line.
func ParseSentinelInfo(fields map[string]string) (SentinelInfo, error) {
	var si SentinelInfo
	var err error
	if si.Masters, err = intField(fields, "sentinel_masters", -1); err != nil || si.Masters < 0 {
		return si, malformed("INFO sentinel without sentinel_masters")
	}
	si.Tilt = fields["sentinel_tilt"] == "1"
	for i := int64(0); i < si.Masters; i++ {
		raw, ok := fields["master"+strconv.FormatInt(i, 10)]
		if !ok {
			return si, malformed("sentinel_masters:%d but master%d missing", si.Masters, i)
		}
		kv, err := ParseKV(raw)
		if err != nil {
			return si, fmt.Errorf("master%d: %w", i, err)
		}
		ms := MonitorSummary{Name: kv["name"], Status: kv["status"], Address: kv["address"]}
		if ms.Replicas, err = intField(kv, "slaves", 0); err != nil {
			return si, err
		}
		if ms.Sentinels, err = intField(kv, "sentinels", 0); err != nil {
			return si, err
		}
		si.Monitors = append(si.Monitors, ms)
	}
	return si, nil
}

// ParseClientList counts the connections in a CLIENT LIST reply by kind: replicas (flag S), the primary link
// of a replica (flag M), pub/sub (flag P) and normal clients. Each line is "k=v k=v ...".
func ParseClientList(text string) (ClientCounts, error) {
	var c ClientCounts
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		fields := map[string]string{}
		for _, tok := range strings.Fields(line) {
			k, v, ok := strings.Cut(tok, "=")
			if !ok {
				return c, malformed("CLIENT LIST token %q", truncate(tok))
			}
			fields[k] = v
		}
		if _, ok := fields["id"]; !ok {
			return c, malformed("CLIENT LIST line without id")
		}
		flags := fields["flags"]
		c.Total++
		switch {
		case strings.Contains(flags, "S"):
			c.Replicas++
		case strings.Contains(flags, "M"):
			c.PrimaryLinks++
		case strings.Contains(flags, "P"):
			c.PubSub++
		default:
			c.Normal++
		}
	}
	return c, nil
}

// ParseACLLog decodes ACL LOG entries (each a field list: count, reason, context, object, username, ...).
func ParseACLLog(reply []any) ([]ACLLogEntry, error) {
	out := make([]ACLLogEntry, 0, len(reply))
	for i, e := range reply {
		fields, err := PairsToMapLoose(e)
		if err != nil {
			return nil, fmt.Errorf("ACL LOG entry %d: %w", i, err)
		}
		n, _ := strconv.ParseInt(fields["count"], 10, 64)
		out = append(out, ACLLogEntry{Count: n, Reason: fields["reason"], Context: fields["context"],
			Object: fields["object"], Username: fields["username"], ClientInfo: fields["client-info"]})
	}
	return out, nil
}

// PairsToMapLoose is PairsToMap for replies that mix scalars with numbers formatted as floats (ACL LOG's
// age-seconds); nested values are skipped instead of refused.
func PairsToMapLoose(v any) (map[string]string, error) {
	list, err := fieldList(v)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(list)/2)
	for i := 0; i < len(list); i += 2 {
		k, err := scalarString(list[i])
		if err != nil {
			return nil, err
		}
		switch val := list[i+1].(type) {
		case float64:
			out[k] = strconv.FormatFloat(val, 'f', -1, 64)
		default:
			if s, err := scalarString(val); err == nil {
				out[k] = s
			}
		}
	}
	return out, nil
}

func parseRoleWord(s string) (Role, error) {
	switch s {
	case "master", "primary":
		return RolePrimary, nil
	case "slave", "replica":
		return RoleReplica, nil
	case "":
		return "", malformed("INFO replication without role")
	default:
		return "", malformed("unknown role %q", truncate(s))
	}
}

func splitFlags(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func intField(m map[string]string, key string, def int64) (int64, error) {
	v, ok := m[key]
	if !ok || v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return def, malformed("%s=%q is not an integer", key, truncate(v))
	}
	return n, nil
}

func atoiField(m map[string]string, key string) (int, error) {
	v, ok := m[key]
	if !ok {
		return 0, malformed("%s missing", key)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 65535 {
		return 0, malformed("%s=%q is not a port", key, truncate(v))
	}
	return n, nil
}

func anyInt(v any) (int64, error) {
	switch t := v.(type) {
	case int64:
		return t, nil
	case string:
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			return 0, malformed("%q is not an integer", truncate(t))
		}
		return n, nil
	default:
		return 0, malformed("expected an integer, got %T", v)
	}
}

func scalarString(v any) (string, error) {
	switch t := v.(type) {
	case string:
		return t, nil
	case int64:
		return strconv.FormatInt(t, 10), nil
	case nil:
		return "", nil
	default:
		return "", malformed("expected a scalar, got %T", v)
	}
}

func leadingInt(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	n, _ := strconv.Atoi(s[:i])
	return n
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// ParseACLGetUserPasswords returns the "passwords" field of an ACL GETUSER reply (Valkey docs, "ACL
// GETUSER": a field list, a map in RESP3, whose "passwords" value is the list of accepted SHA-256 hashes in
// hex). A nil reply (no such user) is an error; callers ask only for users they saw in ACL USERS.
func ParseACLGetUserPasswords(reply any) ([]string, error) {
	if reply == nil {
		return nil, malformed("no such user")
	}
	list, err := fieldList(reply)
	if err != nil {
		return nil, err
	}
	for i := 0; i < len(list); i += 2 {
		if k, _ := scalarString(list[i]); k != "passwords" {
			continue
		}
		pws, ok := list[i+1].([]any)
		if !ok {
			return nil, malformed("passwords is %T, not a list", list[i+1])
		}
		out := make([]string, 0, len(pws))
		for _, p := range pws {
			s, err := scalarString(p)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, malformed("no passwords field")
}

// fieldList returns a RESP2 field list ([k1, v1, k2, v2, ...]) or a RESP3 map as a flat key/value list.
func fieldList(v any) ([]any, error) {
	var list []any
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			list = append(list, k, val)
		}
	case []any:
		list = t
	default:
		return nil, malformed("expected a field list, got %T", v)
	}
	if len(list)%2 != 0 {
		return nil, malformed("odd number of elements (%d) in a field list", len(list))
	}
	return list, nil
}
