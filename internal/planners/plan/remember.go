package plan

// PrimaryChange is a primary move this pass confirmed: the pod confirmed primary before (From) and now (To).
// The zero value is no move (or none known: the first confirmed primary is no move).
type PrimaryChange struct{ From, To string }

// primaryChange compares the pod last confirmed primary before the pass (prev) with the one after (next).
func primaryChange(prev, next Memory) PrimaryChange {
	if prev.LastPrimaryPod == "" || next.LastPrimaryPod == "" || prev.LastPrimaryPod == next.LastPrimaryPod {
		return PrimaryChange{}
	}
	return PrimaryChange{From: prev.LastPrimaryPod, To: next.LastPrimaryPod}
}

// Remember is the memory of the next pass: the one the planner returned (d.Memory) with what the applier
// did folded in (o): a failed planned handoff backs the roll off (rememberHandoff), a node whose primary
// label was taken off has its connections closed again for RecloseWindow (rememberReclose), and the nodes
// whose users were synced record the revision (rememberAccess). It is the only way an outcome reaches the
// planner's memory.
func Remember(w World, d Decision, o Outcome) Memory {
	m := d.Memory
	if o.Handoff != nil {
		rememberHandoff(&m, *o.Handoff, d.HandoffPrint)
	}
	rememberReclose(&m, o.Relabelled)
	rememberAccess(&m, w, o.ACLSync)
	return m
}
