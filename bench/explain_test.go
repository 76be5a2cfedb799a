//go:build bench

package bench

import (
	"fmt"
	"strings"
)

// figureMethod is the method paragraph printed under each figure in BENCHMARKS.md.
var figureMethod = map[int]string{
	1: "Method: three topologies of 1 primary + 2 replicas + 3 Sentinels run their rounds interleaved. *Floor*: bare Sentinel, " +
		"nothing else; the time from SIGKILL of the primary to the first Sentinel answering GET-MASTER-ADDR-BY-NAME with the new " +
		"primary (polled every 5 ms). *Client*: the same topology with the instance controller (fake clientset, defaults: Resync 2 s, " +
		"+switch-master subscription) and the three writers; client outage per round and writer. *min-replicas*: as client, with " +
		"`min-replicas-to-write 1` on every node (1000 ms only). failover-timeout 5000 ms. After each kill the old primary restarts as a " +
		"replica of the new one (as the chart's bootstrap makes it) and the next round waits until replication and every Sentinel are healthy.",
	2: "Method: *ours*: the real instance controller (defaults) sees every StatefulSet at update revision r2 and every pod at r1 " +
		"(as internal/controllers/controller/roll_test.go) and rolls: replicas first, then the handoff of internal/podsteps/handoff: CLIENT PAUSE WRITE on the " +
		"primary, its master_repl_offset polled on every replica Sentinel may promote until each has it, SENTINEL FAILOVER asked of the " +
		"last Sentinel, demotion of the old primary and CLIENT UNPAUSE once that Sentinel names the new primary, CLIENT KILL TYPE " +
		"pubsub on that Sentinel (its subscribers re-ask GET-MASTER-ADDR-BY-NAME instead of waiting for its late +switch-master), and " +
		"the old primary replaced last. A fake kubelet replaces each deleted pod by SIGTERM + start " +
		"of its process. *naive*: no controller; SIGTERM + start of node 0, 1, 2 in ordinal order, each after the previous one is back " +
		"in sync (what a RollingUpdate StatefulSet does, without a handoff). Chart defaults: down-after 5000 ms, failover-timeout " +
		"15000 ms, no persistence. Every node-to-node link delayed (see the title) through internal/testsupport/valkeytest's fault links. The same " +
		"three writers (one per Sentinel); the two rolls alternate.",
	3: "Method: two instance controllers watch the same real topology, each through its own fake clientset: one with the " +
		"+switch-master subscription (default), one with `NoSubscribe` (polling only, default Resync 2 s), so every SENTINEL FAILOVER " +
		"is measured for both at once. The clock starts when +switch-master reaches the benchmark's own subscription on the Sentinel " +
		"that ran the failover and stops when a clientset's pods carry the right `valkey.io/role` labels (sampled every 5 ms). A random " +
		"0-2 s pause before each failover keeps failovers from locking onto the polling cycle.",
	8: "Method: 2K lean valkey-server processes (see the note) are started once, 8 at a time, and reused as K grows; for every K " +
		"three empty Sentinels start, then the sentinel controller (quorum q in namespace platform, --namespaces t1,t2, " +
		"--service-account q-controller) and the shared instance controller (--shared-identity platform/q-instance-controller, " +
		"default Resync 2 s, Go memory limit 90% of the chart's default 128Mi as cli.ApplyMemoryLimit sets it) run in their own " +
		"processes (this test binary re-run as a helper on a fake clientset with K descriptors in t1 and t2 that grant the quorum and " +
		"name the shared controller; the fake's record of served requests is dropped every second). *register*: sentinel controller " +
		"start to every monitor on every Sentinel with its replica, 2 peers and CKQUORUM OK. *labels of all instances*: shared " +
		"controller start to every pod labelled right. *peak RSS*: VmHWM; *at rest*: VmRSS at the end of a 10 s steady window; " +
		"*live heap*: the Go runtime's live heap after its last collection (/gc/heap/live:bytes). *CPU per instance pass*: the shared " +
		"controller's CPU time over the window divided by its instance passes (about K per 2 s); *CPU per pass* of the sentinel " +
		"controller: one pass covers the quorum (every 3 s). *Sentinel CPU, RSS and file descriptors*: /proc of the three Sentinels " +
		"(average). *labels after 10 simultaneous failovers*: SENTINEL FAILOVER for 10 monitors at once on Sentinel 0, twice (20 " +
		"failovers); from the first +switch-master any Sentinel publishes for a monitor (the strict clock, Sentinel's own hello " +
		"propagation included), and from Sentinel 0's (the failover's leader, figure 3's clock), to the label patches (timestamped " +
		"by the helper) that make its labels match the new primary.",
	4: "Method: 2K valkey-server processes (small configs: repl-backlog 256 KiB, maxmemory 16 MiB) are started once and reused as K " +
		"grows; for every K three empty Sentinels start and the real sentinel controller runs in its own process (this test binary " +
		"re-run as TestBenchSentinelControllerProcess, fake clientset with K descriptors, default Resync 3 s). *register*: controller " +
		"process start to every monitor on every Sentinel with its replica, 2 peers and CKQUORUM OK (Sentinels discover each other " +
		"through hello messages every 2 s, which bounds it from below). *registering pass*: wall time of the controller's first pass. " +
		"*peak RSS*: VmHWM of the controller process. *CPU per full reconcile*: the process's CPU time (getrusage) between two passes " +
		"at least 10 s apart divided by the passes, idle work included. *Sentinel CPU at rest*: CPU time (/proc/<pid>/schedstat) of " +
		"the three Sentinels over the same window, with the controller polling at its default rate.",
	6: "Method: for every round a fresh topology of 1 primary + 2 replicas + 3 Sentinels (down-after 5000 ms, failover-timeout " +
		"15000 ms, the charts' system users; the _sentinel user additionally may run FAILOVER, CLIENT PAUSE and CLIENT UNPAUSE, which " +
		"the coordinated failover needs), the three writers, then one handoff by one path; the paths alternate round by round. " +
		"*paused (controller)*: the real instance controller (fake clientset) rolling the primary alone, so it hands off exactly as " +
		"in a planned roll. *coordinated*: SENTINEL FAILOVER <name> COORDINATED asked of the last Sentinel. *coordinated+nudge*: the same, " +
		"then CLIENT KILL TYPE pubsub on that Sentinel once it names the new primary. *plain*: SENTINEL FAILOVER alone. Lag: every " +
		"replication link runs through a delaying proxy (valkeytest fault links, uid-matched iptables redirects), so replicas trail the " +
		"primary. Outage per round: the longest time any writer went without an acknowledged write.",
	7: "Method: for every round a fresh topology of 1 primary + 2 replicas + 3 Sentinels on the engine of the row (down-after " +
		"5000 ms, failover-timeout 15000 ms, the charts' system users), every replication link delayed through valkeytest's fault " +
		"links, the three writers, then the primary's \"pod\" stops one way; the ways alternate round by round. *(a) ours*: " +
		"`prestop.Run` (what `valkey-sentinel-ctl prestop`, the data container's preStop hook, runs) with the files a data pod has " +
		"(node-local _prestop user, _probe password, sentinels.json), then SIGTERM of the primary. *(b) no hook*: SIGTERM alone " +
		"(valkey-server waits up to shutdown-timeout for lagging replicas before it exits); Sentinel fails over after " +
		"down-after-milliseconds. *(c) the peers' hook*: CLIENT PAUSE WRITE, SENTINEL FAILOVER asked of the last Sentinel, wait until " +
		"it names the new primary (polled every 20 ms), SIGTERM; no check that the promoted replica holds the writes acknowledged " +
		"before the pause. The stopped server is not restarted. Outage per round: the longest time any writer went without an " +
		"acknowledged write, from the start of the stop to 2 s after every Sentinel names the new primary.",
	5: "Method: a fresh namespace (Pod Security restricted, as hack/demo.sh), `helm install bench charts/valkey` (replicas 2) and " +
		"`helm install sentinel charts/valkey-sentinel` (replicas 3, selecting the instance) with the charts' defaults and the images " +
		"already on the node; the clock runs from the first `helm install` until every pod of the namespace is Ready and the " +
		"instance's status ConfigMap says state Ready (polled every 250 ms). Skipped without a cluster or images; not measured when " +
		"the node lacks free CPU for the charts' requests (the cluster is shared with e2e runs). The namespace is deleted afterwards.",
}

// explanation of a missed target: figure number and target-name prefix.
var missExplained = []struct {
	fig    int
	prefix string
	text   string
}{
	{1, "unplanned outage", "valkey-go's Sentinel client learns of a failover only from +switch-master on the one Sentinel it " +
		"subscribes to. The floor stops when the first Sentinel *answers* with the new primary, which the failover leader does as " +
		"soon as the replica is promoted; the other Sentinels adopt the new configuration from the leader's hello message a few tens " +
		"of ms later and publish +switch-master at once, but the leader itself publishes it only at +failover-end, after the other " +
		"replica reported its reconfiguration (about 1 s later, Sentinel's INFO period during a failover). A client listening to the " +
		"leader (one time in three) therefore waits about 1.1 s more: the per-round samples are bimodal. Subscribing to every " +
		"Sentinel, or asking GET-MASTER-ADDR-BY-NAME when writes fail, would remove it; it is the client's doing, not the controller's."},
	{2, "planned-roll outage", "Writes are blocked from CLIENT PAUSE WRITE until the clients learn the new primary " +
		"(internal/podsteps/handoff). First the replicas need the link's delay to reach the paused primary's offset (the catch-up; before " +
		"issue 12 a WAIT from a connection that never wrote returned at once and the handoff did not wait at all, losing writes). " +
		"Then the failover leader sees the promotion only in " +
		"its next INFO of the promoted replica: Sentinel sends that INFO once a second during a failover and the first one goes " +
		"out as the failover starts, about 0.2 s before its REPLICAOF NO ONE, so the promotion is seen 1.0-1.1 s after SENTINEL " +
		"FAILOVER. The other Sentinels publish +switch-master within about 60 ms of that (the leader forces a hello); the " +
		"leader's own subscribers are sent to GET-MASTER-ADDR-BY-NAME by CLIENT KILL TYPE pubsub instead of waiting another " +
		"second for its +failover-end. About 1.1-1.2 s plus the replication delay is therefore the floor of a Sentinel-led handoff. " +
		"A single roll far above it (about 3.3 s, for the writers of one or two Sentinels only) is a Sentinel that did not get the " +
		"leader's forced hello and learned the new configuration only from the next regular hello, 2 s later (seen with valkey 9.1 in " +
		"about one roll in four; the controller's logs show its +switch-master that late). Going below the floor would " +
		"mean timing SENTINEL FAILOVER against Sentinel's INFO schedule and steering its replica choice (replica-priority): not " +
		"done, it depends on Sentinel internals. Before the wait for the replicas' 1 s REPLCONF ACK was replaced and the leader's " +
		"subscribers were nudged, the outage was 3.2 s (2.2 s for a client subscribed to the leader)."},
	{2, "0 lost", "An acknowledged write is lost when the promoted replica lacks it (the handoff did not wait for the replicas' " +
		"offsets: issue 12, F1) or when the old primary accepts it after the write pause is lifted and is then demoted (F2). " +
		"internal/podsteps/handoff waits for every promotable replica to reach the paused offset and demotes the old primary (REPLICAOF " +
		"the new primary) before CLIENT UNPAUSE. A miss means one of those windows has reopened."},
	{2, "outage ours / naive", "The naive roll's outage here is only SIGTERM of the primary (valkey-server waits up to a second for " +
		"its replicas' acknowledgement before exiting) plus a restart of about 0.1 s, because the fake kubelet restarts a process at " +
		"once; a real pod replacement takes seconds, and longer than down-after-milliseconds triggers an unplanned failover. The ratio " +
		"is therefore pessimistic for us, and our own outage (see above) cannot shrink below Sentinel's 1 s INFO period to meet it. " +
		"The naive roll loses the whole dataset."},
	{7, "valkey-9.1: (a) write outage", "The hook's outage is the catch-up plus Sentinel's promotion floor: after CLIENT PAUSE WRITE the replicas need the link's one-way delay to receive the writes acknowledged just before the pause (the hook waits for their offsets: that is why it loses none), then the asked Sentinel sees the promotion about 1.1 s after SENTINEL FAILOVER (its INFO period during a failover; figure 2 explains that floor). At 100 ms each way that is 1.24-1.35 s; at 300 ms it is 1.48-1.64 s. The peers' hook (c) is 0.3-0.4 s faster at 300 ms because it does not wait: it lost 35-39 acknowledged writes there. A real cluster's replication delay is milliseconds, so the 100 ms rows are already pessimistic."},
	{7, "valkey-8.0: (a) write outage", "The hook's outage is the catch-up plus Sentinel's promotion floor: after CLIENT PAUSE WRITE the replicas need the link's one-way delay to receive the writes acknowledged just before the pause (the hook waits for their offsets: that is why it loses none), then the asked Sentinel sees the promotion about 1.1 s after SENTINEL FAILOVER (its INFO period during a failover; figure 2 explains that floor). At 100 ms each way that is 1.24-1.35 s; at 300 ms it is 1.48-1.64 s. The peers' hook (c) is 0.3-0.4 s faster at 300 ms because it does not wait: it lost 35-39 acknowledged writes there. A real cluster's replication delay is milliseconds, so the 100 ms rows are already pessimistic."},
	{3, "label convergence", "The subscription enqueues the instance on +switch-master; a p95 above 1 s means passes queued behind " +
		"slow ones (see the samples)."},
	{4, "controller RSS", "The sentinel controller dials data nodes only to find where to register (one-off connections) " +
		"and every connection uses 32 KiB buffers instead of valkey-go's 0.5 MiB per direction; before that, pooled data-node " +
		"connections cost about 2 MiB per instance (152 MiB at K = 50). A miss means connections are kept per instance again: " +
		"see the open-connections column."},
	{5, "time to ready", "Look at the steps: pod scheduling and image start, the readiness probes' period (5 s), and the " +
		"controller's first Ready pass."},
}

// explanations returns the explanation of every missed target (empty when all pass).
func explanations(figs []*figure) string {
	var b strings.Builder
	for _, f := range figs {
		for _, tg := range f.Targets {
			if tg.Pass || tg.Skip {
				continue
			}
			for _, m := range missExplained {
				if m.fig == f.N && strings.HasPrefix(tg.Name, m.prefix) {
					fmt.Fprintf(&b, "- **Figure %d, %s** (measured %s): %s\n", f.N, tg.Name, tg.Measured, m.text)
				}
			}
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "These explanations come from the analysis done when the suite was written; re-check them when the numbers move.\n\n" + b.String()
}
