package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/valkey-ha/valkey-ha/internal/chartapi/contract"
)

// TestStartRefusedReadsInitContainers (issue 28): the restore step of restoreFrom is an init container; its
// refusal (a corrupt or newer-engine backup) is a "start refused: " termination message like the server
// container's, and reaches the StartRefused Event and ValuesAccepted the same way. Before init containers were
// read, such a pod reported nothing.
func TestStartRefusedReadsInitContainers(t *testing.T) {
	msg := "restoreFrom: restore refused: cache-valkey-20261203T030000Z.rdb is corrupt: 1000 bytes with SHA-256 aa, its metadata says 1000 bytes with bb"
	for name, tc := range map[string]struct {
		pod  corev1.PodStatus
		want string
	}{
		"restore step refused, now": {pod: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{
			{Name: "install-ctl", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
			{Name: "restore", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: contract.StartRefusedPrefix + msg}}},
		}}, want: msg},
		"restore step refused, last time (back-off)": {pod: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{
			{Name: "restore", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: contract.StartRefusedPrefix + msg}}},
		}}, want: msg},
		"restore step ran": {pod: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{
			{Name: "restore", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
		}}, want: ""},
		"another init container's failure is no refusal": {pod: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{
			{Name: "install-ctl", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "cp: no space"}}},
		}}, want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, startRefused(&corev1.Pod{Status: tc.pod}))
		})
	}
}
