package rollout

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Guards issue 9.2: the pod-template hash is computed in workflow code, so a
// worker upgrade whose hash function (or k8s.io/api defaults) computes
// another hash for the same template must not roll a running lease onto a
// new ReplicaSet. The running ReplicaSet is found by its template, as
// upstream's FindNewReplicaSet does, whatever hash it carries: here it
// carries one no ComputeHash ever gives ("older-hash", as an older build's
// function would have named it).
func TestAHashFunctionChangeCreatesNoReplicaSetForAnUnchangedTemplate(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, strategy := range []appsv1.DeploymentStrategyType{appsv1.RollingUpdateDeploymentStrategyType, appsv1.RecreateDeploymentStrategyType} {
		t.Run(string(strategy), func(t *testing.T) {
			d := generateDeployment("nginx:1.27")
			d.Spec.Replicas = ptrTo(int32(3))
			d.Spec.Strategy.Type = strategy
			SetDeploymentDefaults(&d)

			// What the running build created and rolled out completely.
			first, _, err := Sync(d.DeepCopy(), nil, false, now)
			if err != nil || first.Create == nil {
				t.Fatalf("first sync: plan %+v, err %v", first, err)
			}
			running := first.Create.DeepCopy()
			const older = "older-hash"
			running.Name = d.Name + "-" + older
			running.UID = "uid-running"
			for _, l := range []map[string]string{running.Labels, running.Spec.Selector.MatchLabels, running.Spec.Template.Labels} {
				l[appsv1.DefaultDeploymentUniqueLabelKey] = older
			}
			running.Spec.Replicas = ptrTo(int32(3))
			running.Status = appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, ObservedGeneration: 1}
			running.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))

			// The upgraded build syncs the same template.
			plan, status, err := Sync(d.DeepCopy(), []*appsv1.ReplicaSet{running}, false, now)
			if err != nil {
				t.Fatal(err)
			}
			if plan.Create != nil {
				t.Fatalf("a new ReplicaSet %s for an unchanged template", plan.Create.Name)
			}
			for _, op := range plan.Scales {
				t.Errorf("unexpected scale %+v", op)
			}
			if len(plan.Deletes) > 0 {
				t.Errorf("unexpected deletes %v", plan.Deletes)
			}
			if status.UpdatedReplicas != 3 || status.AvailableReplicas != 3 {
				t.Errorf("the running ReplicaSet is not the new one: %+v", status)
			}
		})
	}
}
