package valkey

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	vk "github.com/valkey-io/valkey-go"
)

// The SENTINEL subcommands below follow the Sentinel docs, section "Sentinel commands". valkey-go has typed
// builders for only a few of them, so all go through the Arbitrary builder with parsers in parse.go.

// SentinelMasters runs SENTINEL MASTERS and returns every monitor this Sentinel knows.
func (c *Client) SentinelMasters(ctx context.Context) ([]Monitor, error) {
	return c.parseMasters(c.do(ctx, "SENTINEL", "MASTERS"))
}

func (c *Client) parseMasters(res vk.ValkeyResult) ([]Monitor, error) {
	v, err := res.ToAny()
	if err != nil {
		return nil, c.wrap("SENTINEL MASTERS", err)
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, c.wrap("SENTINEL MASTERS", malformed("reply is %T", v))
	}
	out := make([]Monitor, 0, len(arr))
	for _, e := range arr {
		f, err := PairsToMap(e)
		if err != nil {
			return nil, c.wrap("SENTINEL MASTERS", err)
		}
		m, err := ParseMonitor(f)
		if err != nil {
			return nil, c.wrap("SENTINEL MASTERS", err)
		}
		out = append(out, m)
	}
	return out, nil
}

// SentinelOverview sends SENTINEL MASTERS and SENTINEL CKQUORUM of each of names in one pipeline (one round
// trip): every monitor this Sentinel knows, and the CKQUORUM result of each named monitor it could answer
// for (OK or NOQUORUM; a monitor it does not know is left out). The error is that of SENTINEL MASTERS.
func (c *Client) SentinelOverview(ctx context.Context, names []string) ([]Monitor, map[string]Quorum, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cmds := vk.Commands{c.c.B().Arbitrary("SENTINEL", "MASTERS").Build()}
	for _, n := range names {
		cmds = append(cmds, c.c.B().Arbitrary("SENTINEL", "CKQUORUM", n).Build())
	}
	res := c.c.DoMulti(ctx, cmds...)
	ms, err := c.parseMasters(res[0])
	if err != nil {
		return nil, nil, err
	}
	qs := map[string]Quorum{}
	for i, n := range names {
		if q, err := c.parseCKQuorum(res[i+1]); err == nil {
			qs[n] = q
		}
	}
	return ms, qs, nil
}

// SentinelMaster runs SENTINEL MASTER name. A monitor that does not exist is reported with found=false and no
// error.
func (c *Client) SentinelMaster(ctx context.Context, name string) (m Monitor, found bool, err error) {
	return c.parseMaster(c.do(ctx, "SENTINEL", "MASTER", name))
}

func (c *Client) parseMaster(res vk.ValkeyResult) (m Monitor, found bool, err error) {
	v, err := res.ToAny()
	if err != nil {
		if isNoSuchMaster(err) {
			return Monitor{}, false, nil
		}
		return Monitor{}, false, c.wrap("SENTINEL MASTER", err)
	}
	f, err := PairsToMap(v)
	if err != nil {
		return Monitor{}, false, c.wrap("SENTINEL MASTER", err)
	}
	m, err = ParseMonitor(f)
	return m, err == nil, c.wrap("SENTINEL MASTER", err)
}

func isNoSuchMaster(err error) bool {
	return err != nil && strings.Contains(err.Error(), "No such master")
}

// SentinelReplicas runs SENTINEL REPLICAS name.
func (c *Client) SentinelReplicas(ctx context.Context, name string) ([]SentinelReplica, error) {
	return c.parseReplicas(c.do(ctx, "SENTINEL", "REPLICAS", name))
}

func (c *Client) parseReplicas(res vk.ValkeyResult) ([]SentinelReplica, error) {
	v, err := res.ToAny()
	if err != nil {
		return nil, c.wrap("SENTINEL REPLICAS", err)
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, c.wrap("SENTINEL REPLICAS", malformed("reply is %T", v))
	}
	out := make([]SentinelReplica, 0, len(arr))
	for _, e := range arr {
		f, err := PairsToMap(e)
		if err != nil {
			return nil, c.wrap("SENTINEL REPLICAS", err)
		}
		r, err := ParseSentinelReplica(f)
		if err != nil {
			return nil, c.wrap("SENTINEL REPLICAS", err)
		}
		out = append(out, r)
	}
	return out, nil
}

// SentinelSentinels runs SENTINEL SENTINELS name: the other Sentinels monitoring name (itself excluded).
func (c *Client) SentinelSentinels(ctx context.Context, name string) ([]SentinelPeer, error) {
	v, err := c.anyReply(ctx, "SENTINEL SENTINELS", "SENTINEL", "SENTINELS", name)
	if err != nil {
		return nil, err
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, c.wrap("SENTINEL SENTINELS", malformed("reply is %T", v))
	}
	out := make([]SentinelPeer, 0, len(arr))
	for _, e := range arr {
		f, err := PairsToMap(e)
		if err != nil {
			return nil, c.wrap("SENTINEL SENTINELS", err)
		}
		p, err := ParseSentinelPeer(f)
		if err != nil {
			return nil, c.wrap("SENTINEL SENTINELS", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// SentinelCKQuorum runs SENTINEL CKQUORUM name (see ParseCKQuorum). A NOQUORUM reply is a result, not an
// error; an unknown monitor is an error.
func (c *Client) SentinelCKQuorum(ctx context.Context, name string) (Quorum, error) {
	return c.parseCKQuorum(c.do(ctx, "SENTINEL", "CKQUORUM", name))
}

func (c *Client) parseCKQuorum(res vk.ValkeyResult) (Quorum, error) {
	s, err := res.ToString()
	if err != nil && res.NonValkeyError() != nil {
		return Quorum{}, c.wrap("SENTINEL CKQUORUM", err)
	}
	q, err := ParseCKQuorum(s, err)
	return q, c.wrap("SENTINEL CKQUORUM", err)
}

// MonitorView is one Sentinel's view of one monitor, read in one round trip by SentinelMonitorView.
type MonitorView struct {
	// Found is false when the Sentinel does not know the monitor (then Replicas is empty).
	Found   bool
	Monitor Monitor
	// Replicas is SENTINEL REPLICAS; ReplicasErr why it could not be read.
	Replicas    []SentinelReplica
	ReplicasErr error
	// Quorum is SENTINEL CKQUORUM when it was asked for (QuorumAsked); QuorumErr why it could not be read.
	QuorumAsked bool
	Quorum      Quorum
	QuorumErr   error
}

// SentinelMonitorView sends SENTINEL MASTER name, SENTINEL REPLICAS name and, with ckquorum, SENTINEL
// CKQUORUM name in one pipeline (one round trip; Sentinel docs, "Sentinel commands"). The error is that of
// SENTINEL MASTER (the Sentinel did not answer, or answered garbage); the other two carry their own.
func (c *Client) SentinelMonitorView(ctx context.Context, name string, ckquorum bool) (MonitorView, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cmds := vk.Commands{c.c.B().Arbitrary("SENTINEL", "MASTER", name).Build(), c.c.B().Arbitrary("SENTINEL", "REPLICAS", name).Build()}
	if ckquorum {
		cmds = append(cmds, c.c.B().Arbitrary("SENTINEL", "CKQUORUM", name).Build())
	}
	res := c.c.DoMulti(ctx, cmds...)
	var v MonitorView
	var err error
	if v.Monitor, v.Found, err = c.parseMaster(res[0]); err != nil {
		return MonitorView{}, err
	}
	if v.Found {
		v.Replicas, v.ReplicasErr = c.parseReplicas(res[1])
	}
	if ckquorum {
		v.QuorumAsked = true
		v.Quorum, v.QuorumErr = c.parseCKQuorum(res[2])
	}
	return v, nil
}

// SentinelPrimaryAddr runs SENTINEL GET-MASTER-ADDR-BY-NAME name (the spelling every Valkey and Redis version
// accepts, case S26). found is false when the Sentinel does not know the monitor (nil reply).
func (c *Client) SentinelPrimaryAddr(ctx context.Context, name string) (host string, port int, found bool, err error) {
	res := c.do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", name)
	arr, err := res.AsStrSlice()
	if err != nil {
		if vk.IsValkeyNil(err) {
			return "", 0, false, nil
		}
		return "", 0, false, c.wrap("SENTINEL GET-MASTER-ADDR-BY-NAME", err)
	}
	if len(arr) != 2 {
		return "", 0, false, c.wrap("SENTINEL GET-MASTER-ADDR-BY-NAME", malformed("%d elements", len(arr)))
	}
	p, err := strconv.Atoi(arr[1])
	if err != nil || p <= 0 || p > 65535 {
		return "", 0, false, c.wrap("SENTINEL GET-MASTER-ADDR-BY-NAME", malformed("port %q", truncate(arr[1])))
	}
	return arr[0], p, true, nil
}

// SentinelMonitor runs SENTINEL MONITOR name host port quorum.
func (c *Client) SentinelMonitor(ctx context.Context, name, host string, port, quorum int) error {
	return c.ok(ctx, "SENTINEL MONITOR "+name, "SENTINEL", "MONITOR", name, host, strconv.Itoa(port), strconv.Itoa(quorum))
}

// SentinelSet runs SENTINEL SET name key value [key value ...]; kv holds the pairs in order.
func (c *Client) SentinelSet(ctx context.Context, name string, kv ...string) error {
	if len(kv) == 0 || len(kv)%2 != 0 {
		return fmt.Errorf("SENTINEL SET %s: need key/value pairs, got %d arguments", name, len(kv))
	}
	return c.ok(ctx, "SENTINEL SET "+name, append([]string{"SENTINEL", "SET", name}, kv...)...)
}

// SentinelRemove runs SENTINEL REMOVE name. Removing a monitor that does not exist is not an error.
func (c *Client) SentinelRemove(ctx context.Context, name string) error {
	err := c.ok(ctx, "SENTINEL REMOVE "+name, "SENTINEL", "REMOVE", name)
	if isNoSuchMaster(err) {
		return nil
	}
	return err
}

// SentinelReset runs SENTINEL RESET pattern and returns how many monitors were reset. RESET forgets the
// replicas and peers of the matched monitors until they are rediscovered, so callers must never issue it while
// a primary is down or a failover runs (case S10).
func (c *Client) SentinelReset(ctx context.Context, pattern string) (int64, error) {
	n, err := c.do(ctx, "SENTINEL", "RESET", pattern).AsInt64()
	return n, c.wrap("SENTINEL RESET "+pattern, err)
}

// SentinelFailover runs SENTINEL FAILOVER name: a forced failover that needs no agreement from other
// Sentinels. It returns once the failover has started, not finished: by then this Sentinel flags the monitor
// failover_in_progress. The refusals INPROG and NOGOODSLAVE wrap ErrFailoverInProgress and ErrNoGoodReplica;
// an error for which IsServerError is false leaves open whether the failover started.
func (c *Client) SentinelFailover(ctx context.Context, name string) error {
	return classifyFailoverError(c.ok(ctx, "SENTINEL FAILOVER "+name, "SENTINEL", "FAILOVER", name))
}

// SentinelFailoverCoordinated runs SENTINEL FAILOVER name COORDINATED (Valkey 9.0 and later; older Sentinels
// answer a syntax error): the Sentinel has the primary run FAILOVER TO the replica it selected, so the primary
// pauses writes, waits until that replica has its offset and demotes itself before the replica is promoted
// (Valkey docs, "SENTINEL FAILOVER" and "FAILOVER"). The Sentinel's auth-user on the data nodes needs
// +failover. Like SentinelFailover, it returns once the failover has started.
func (c *Client) SentinelFailoverCoordinated(ctx context.Context, name string) error {
	return c.ok(ctx, "SENTINEL FAILOVER "+name+" COORDINATED", "SENTINEL", "FAILOVER", name, "COORDINATED")
}

// InfoSentinel runs INFO sentinel (see ParseSentinelInfo).
func (c *Client) InfoSentinel(ctx context.Context) (SentinelInfo, error) {
	f, err := c.Info(ctx, "sentinel")
	if err != nil {
		return SentinelInfo{}, err
	}
	si, err := ParseSentinelInfo(f)
	return si, c.wrap("INFO sentinel", err)
}

// SwitchPrimary is a parsed +switch-master event: "<name> <old-host> <old-port> <new-host> <new-port>".
type SwitchPrimary struct {
	Name    string
	OldHost string
	OldPort int
	NewHost string
	NewPort int
}

// ParseSwitchPrimary parses the payload of a +switch-master message (Sentinel docs, "Pub/Sub messages").
func ParseSwitchPrimary(payload string) (SwitchPrimary, error) {
	f := strings.Fields(payload)
	if len(f) != 5 {
		return SwitchPrimary{}, malformed("+switch-master %q", truncate(payload))
	}
	op, err1 := strconv.Atoi(f[2])
	np, err2 := strconv.Atoi(f[4])
	if err1 != nil || err2 != nil {
		return SwitchPrimary{}, malformed("+switch-master ports in %q", truncate(payload))
	}
	return SwitchPrimary{Name: f[0], OldHost: f[1], OldPort: op, NewHost: f[3], NewPort: np}, nil
}

// SubscribeSwitchPrimary subscribes to +switch-master on this Sentinel and calls fn for every event until ctx
// ends or the connection fails; it returns the reason. Malformed payloads are skipped.
func (c *Client) SubscribeSwitchPrimary(ctx context.Context, fn func(SwitchPrimary)) error {
	err := c.c.Receive(ctx, c.c.B().Subscribe().Channel("+switch-master").Build(), func(msg vk.PubSubMessage) {
		if sp, err := ParseSwitchPrimary(msg.Message); err == nil {
			fn(sp)
		}
	})
	return c.wrap("SUBSCRIBE +switch-master", err)
}

// MonitorEvent is one Sentinel event about a monitor's topology (Sentinel docs, "Pub/Sub messages"): Channel
// is the event ("+switch-master", "+convert-to-slave"), Monitor the monitor it concerns, Payload the message.
type MonitorEvent struct {
	Channel string
	Monitor string
	Payload string
}

// TopologyEvents are the Sentinel events after which a node's role has changed: the primary moved
// (+switch-master) or Sentinel turned a node that still claimed to be primary into a replica
// (+convert-to-slave: the demoted old primary of a failover, an orphan that came back).
var TopologyEvents = []string{"+switch-master", "+convert-to-slave"}

// ParseMonitorEvent returns the monitor an event message concerns: the first word of +switch-master
// ("<name> <old-ip> <old-port> <new-ip> <new-port>"), the name after "@" of an instance event ("<type>
// <name> <ip> <port> @ <master-name> <master-ip> <master-port>").
func ParseMonitorEvent(channel, payload string) (MonitorEvent, error) {
	f := strings.Fields(payload)
	ev := MonitorEvent{Channel: channel, Payload: payload}
	if channel == "+switch-master" {
		sp, err := ParseSwitchPrimary(payload)
		ev.Monitor = sp.Name
		return ev, err
	}
	for i, w := range f {
		if w == "@" && i+1 < len(f) {
			ev.Monitor = f[i+1]
			return ev, nil
		}
	}
	if len(f) >= 2 && f[0] == "master" {
		ev.Monitor = f[1]
		return ev, nil
	}
	return ev, malformed("%s %q", channel, truncate(payload))
}

// SubscribeTopology subscribes to TopologyEvents on this Sentinel and calls fn for every event until ctx
// ends or the connection fails; it returns the reason. Malformed payloads are skipped.
func (c *Client) SubscribeTopology(ctx context.Context, fn func(MonitorEvent)) error {
	err := c.c.Receive(ctx, c.c.B().Subscribe().Channel(TopologyEvents...).Build(), func(msg vk.PubSubMessage) {
		if ev, err := ParseMonitorEvent(msg.Channel, msg.Message); err == nil {
			fn(ev)
		}
	})
	return c.wrap("SUBSCRIBE "+strings.Join(TopologyEvents, " "), err)
}
