package deploy

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// restrictedViolations evaluates a pod against the Pod Security
// "restricted" level, latest version, with the checks the API server's
// admission plugin runs (k8s.io/pod-security-admission/policy), and
// returns what it forbids.
func restrictedViolations(t *testing.T, meta metav1.ObjectMeta, spec *corev1.PodSpec) []string {
	t.Helper()
	ev, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range ev.EvaluatePod(psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}, &meta, spec) {
		if !r.Allowed {
			out = append(out, fmt.Sprintf("%s: %s", r.ForbiddenReason, r.ForbiddenDetail))
		}
	}
	return out
}

// TestPodSecurityCheckRefuses makes sure the evaluation does refuse what
// the namespace would (a pod of the chart's defaults: no security context).
func TestPodSecurityCheckRefuses(t *testing.T) {
	spec := &corev1.PodSpec{Containers: []corev1.Container{{Name: "nats", Image: "nats:2.15.3-alpine"}}}
	if v := restrictedViolations(t, metav1.ObjectMeta{Name: "x"}, spec); len(v) < 3 {
		t.Fatalf("a pod without security context passes restricted: %v", v)
	}
}
