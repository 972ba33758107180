package rollout

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestSync(t *testing.T) {
	now := at(30)
	nowT := metav1.NewTime(now)
	labels := map[string]string{"app": "web"}
	progressDeadline := func(d *appsv1.Deployment) *appsv1.Deployment {
		d.Spec.ProgressDeadlineSeconds = ptrTo(int32(600))
		return d
	}
	availableTrue := appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: MinimumReplicasAvailable, Message: "Deployment has minimum availability.", LastUpdateTime: nowT, LastTransitionTime: nowT}
	progressingCond := func(status corev1.ConditionStatus, reason, msg string, ts metav1.Time) appsv1.DeploymentCondition {
		return appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: status, Reason: reason, Message: msg, LastUpdateTime: ts, LastTransitionTime: ts}
	}
	// live is a ReplicaSet of d's template whose pods all exist and are available.
	live := func(d *appsv1.Deployment, name string, size int32, revision string) *appsv1.ReplicaSet {
		r := newReplicaSet(d, name, size)
		r.CreationTimestamp = metav1.NewTime(at(10))
		r.Status = appsv1.ReplicaSetStatus{Replicas: size, ReadyReplicas: size, AvailableReplicas: size, ObservedGeneration: 1, TerminatingReplicas: ptrTo(int32(0))}
		SetReplicasAnnotations(r, *d.Spec.Replicas, *d.Spec.Replicas+MaxSurge(*d))
		return withRevision(r, revision)
	}
	// stale is a ReplicaSet with another image.
	stale := func(d *appsv1.Deployment, name string, size int32, revision string) *appsv1.ReplicaSet {
		r := live(d, name, size, revision)
		r.CreationTimestamp = metav1.NewTime(at(0))
		r.Spec.Template.Spec.Containers[0].Image = "foo/bar:" + name
		return r
	}

	type check func(t *testing.T, plan Plan, status appsv1.DeploymentStatus)
	tests := []struct {
		name           string
		d              func() *appsv1.Deployment
		rsList         func(d *appsv1.Deployment) []*appsv1.ReplicaSet
		oldPodsRunning bool
		wantStep       Step
		check          check
	}{
		{
			// upstream TestSyncDeploymentCreatesReplicaSet
			name: "creates the replica set",
			d: func() *appsv1.Deployment {
				return newDeployment("foo", 1, nil, nil, nil, map[string]string{"foo": "bar"})
			},
			wantStep: StepCreateNew,
			check: func(t *testing.T, plan Plan, status appsv1.DeploymentStatus) {
				require.NotNil(t, plan.Create)
				assert.Equal(t, int32(1), *plan.Create.Spec.Replicas)
				assert.Empty(t, plan.Scales)
				assert.True(t, plan.StatusChanged)
				assert.Equal(t, appsv1.DeploymentStatus{
					UnavailableReplicas: 1, TerminatingReplicas: ptrTo(int32(0)),
					Conditions: []appsv1.DeploymentCondition{availableTrue},
				}, status)
			},
		},
		{
			name: "creating with a progress deadline records NewReplicaSetCreated",
			d: func() *appsv1.Deployment {
				return progressDeadline(newDeployment("web", 2, nil, intOrStr(1), intOrStr(0), labels))
			},
			wantStep: StepCreateNew,
			check: func(t *testing.T, plan Plan, status appsv1.DeploymentStatus) {
				require.NotNil(t, plan.Create)
				want := progressingCond(corev1.ConditionTrue, NewReplicaSetReason, fmt.Sprintf("Created new replica set %q", plan.Create.Name), nowT)
				assert.Equal(t, &want, GetDeploymentCondition(status, appsv1.DeploymentProgressing))
			},
		},
		{
			// upstream TestSyncDeploymentDontDoAnythingDuringDeletion
			name: "being deleted: status only",
			d: func() *appsv1.Deployment {
				d := newDeployment("foo", 1, nil, nil, nil, map[string]string{"foo": "bar"})
				d.DeletionTimestamp = &nowT
				return d
			},
			wantStep: StepStatusOnly,
			check: func(t *testing.T, plan Plan, status appsv1.DeploymentStatus) {
				assert.True(t, plan.Empty())
				assert.Equal(t, int32(0), status.Replicas)
				assert.True(t, plan.StatusChanged)
			},
		},
		{
			// upstream TestDontSyncDeploymentsWithEmptyPodSelector
			name: "empty selector: nothing but observedGeneration",
			d: func() *appsv1.Deployment {
				d := newDeployment("foo", 1, nil, nil, nil, map[string]string{"foo": "bar"})
				d.Spec.Selector = &metav1.LabelSelector{}
				d.Generation = 3
				d.Status.ObservedGeneration = 1
				return d
			},
			wantStep: StepSelectingAll,
			check: func(t *testing.T, plan Plan, status appsv1.DeploymentStatus) {
				assert.True(t, plan.Empty())
				assert.Equal(t, appsv1.DeploymentStatus{ObservedGeneration: 3}, status)
				assert.NotEmpty(t, plan.Message)
			},
		},
		{
			name: "empty but non-nil matchLabels is not caught by the empty selector check, as upstream",
			d: func() *appsv1.Deployment {
				d := newDeployment("foo", 1, nil, nil, nil, map[string]string{"foo": "bar"})
				d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{}}
				return d
			},
			wantStep: StepCreateNew,
		},
		{
			// upstream TestReentrantRollback
			name: "reentrant rollback: template rolled back, no replica set touched",
			d: func() *appsv1.Deployment {
				d := newDeployment("foo", 1, nil, nil, nil, map[string]string{"foo": "bar"})
				d.Annotations = map[string]string{RevisionAnnotation: "2"}
				setRollbackTo(d, ptrTo(int64(0)))
				return d
			},
			rsList: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				rs1 := newReplicaSet(d, "deploymentrs-old", 0)
				rs1.Annotations = map[string]string{RevisionAnnotation: "1"}
				rs1.Spec.Template.Spec.TerminationGracePeriodSeconds = ptrTo(int64(1))
				rs1.Spec.Selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] = "hash"
				rs2 := newReplicaSet(d, "deploymentrs-new", 1)
				rs2.Annotations = map[string]string{RevisionAnnotation: "2"}
				rs2.Spec.Selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] = "hash"
				return []*appsv1.ReplicaSet{rs1, rs2}
			},
			wantStep: StepRollback,
			check: func(t *testing.T, plan Plan, status appsv1.DeploymentStatus) {
				assert.Nil(t, plan.Create)
				assert.Nil(t, plan.Update)
				assert.Empty(t, plan.Scales)
				require.NotNil(t, plan.Deployment)
				assert.Equal(t, ptrTo(int64(1)), plan.Deployment.Spec.Template.Spec.TerminationGracePeriodSeconds)
				assert.NotContains(t, plan.Deployment.Annotations, appsv1.DeprecatedRollbackTo)
				assert.Equal(t, RollbackDone+`: Rolled back deployment "foo" to revision 1`, plan.Message)
			},
		},
		{
			name: "rollback when the new replica set does not exist yet creates it first",
			d: func() *appsv1.Deployment {
				d := newDeployment("web", 2, nil, intOrStr(1), intOrStr(0), labels)
				setRollbackTo(d, ptrTo(int64(0)))
				return d
			},
			rsList: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				return []*appsv1.ReplicaSet{stale(d, "web-a", 2, "1")}
			},
			wantStep: StepRollback,
			check: func(t *testing.T, plan Plan, status appsv1.DeploymentStatus) {
				require.NotNil(t, plan.Create)
				assert.Equal(t, "2", plan.Create.Annotations[RevisionAnnotation])
				require.NotNil(t, plan.Deployment)
				assert.Equal(t, "foo/bar:web-a", plan.Deployment.Spec.Template.Spec.Containers[0].Image)
				assert.Equal(t, "2", plan.Deployment.Annotations[RevisionAnnotation], "revision recorded by the creation")
			},
		},
		{
			name: "paused: paused condition, proportional scaling and history cleanup only",
			d: func() *appsv1.Deployment {
				d := progressDeadline(newDeployment("web", 4, ptrTo(int32(0)), intOrStr(1), intOrStr(0), labels))
				d.Spec.Paused = true
				d.Spec.Template.Spec.Containers[0].Image = "web:v2" // a rollout that must not start
				return d
			},
			rsList: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				a := stale(d, "web-a", 3, "1")
				SetReplicasAnnotations(a, 3, 4)
				return []*appsv1.ReplicaSet{a, stale(d, "web-b", 0, "2")}
			},
			wantStep: StepPaused,
			check: func(t *testing.T, plan Plan, status appsv1.DeploymentStatus) {
				assert.Nil(t, plan.Create, "no rollout while paused")
				assert.Equal(t, []ScaleOp{{ReplicaSet: "web-a", From: 3, To: 4, DesiredReplicas: 4, MaxReplicas: 5, Reason: "Scaled up replica set web-a from 3 to 4"}}, plan.Scales)
				assert.Equal(t, []string{"web-b"}, plan.Deletes)
				want := progressingCond(corev1.ConditionUnknown, PausedDeployReason, "Deployment is paused", nowT)
				assert.Equal(t, &want, GetDeploymentCondition(status, appsv1.DeploymentProgressing))
			},
		},
		{
			name: "paused with a rollback pending: no history cleanup",
			d: func() *appsv1.Deployment {
				d := newDeployment("web", 3, ptrTo(int32(0)), intOrStr(1), intOrStr(0), labels)
				d.Spec.Paused = true
				setRollbackTo(d, ptrTo(int64(1)))
				return d
			},
			rsList: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				return []*appsv1.ReplicaSet{live(d, "web-new", 3, "2"), stale(d, "web-a", 0, "1")}
			},
			wantStep: StepPaused,
			check: func(t *testing.T, plan Plan, status appsv1.DeploymentStatus) {
				assert.True(t, plan.Empty())
			},
		},
		{
			name: "resumed: DeploymentResumed condition restarts the deadline",
			d: func() *appsv1.Deployment {
				d := progressDeadline(newDeployment("web", 2, nil, intOrStr(1), intOrStr(0), labels))
				d.Status = appsv1.DeploymentStatus{Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1}
				d.Status.Conditions = []appsv1.DeploymentCondition{progressingCond(corev1.ConditionUnknown, PausedDeployReason, "Deployment is paused", metav1.NewTime(at(0)))}
				return d
			},
			rsList: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				r := live(d, "web-new", 2, "1")
				r.Status.ReadyReplicas, r.Status.AvailableReplicas = 1, 1
				return []*appsv1.ReplicaSet{r}
			},
			wantStep: StepWait,
			check: func(t *testing.T, plan Plan, status appsv1.DeploymentStatus) {
				want := progressingCond(corev1.ConditionUnknown, ResumedDeployReason, "Deployment is resumed", nowT)
				want.LastTransitionTime = metav1.NewTime(at(0)) // still Unknown: no transition
				assert.Equal(t, &want, GetDeploymentCondition(status, appsv1.DeploymentProgressing))
			},
		},
		{
			name: "resumed and progressing in the same sync: ReplicaSetUpdated",
			d: func() *appsv1.Deployment {
				d := progressDeadline(newDeployment("web", 2, nil, intOrStr(1), intOrStr(0), labels))
				d.Status.Conditions = []appsv1.DeploymentCondition{progressingCond(corev1.ConditionUnknown, PausedDeployReason, "Deployment is paused", metav1.NewTime(at(0)))}
				return d
			},
			rsList: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				return []*appsv1.ReplicaSet{stale(d, "web-a", 2, "1")}
			},
			wantStep: StepCreateNew,
			check: func(t *testing.T, plan Plan, status appsv1.DeploymentStatus) {
				// Resumed, then NewReplicaSetCreated, then progress seen against
				// the old (empty) status: lastTransitionTime kept from the
				// True condition set in this very sync.
				require.NotNil(t, plan.Create)
				want := progressingCond(corev1.ConditionTrue, ReplicaSetUpdatedReason, fmt.Sprintf("ReplicaSet %q is progressing.", plan.Create.Name), nowT)
				assert.Equal(t, &want, GetDeploymentCondition(status, appsv1.DeploymentProgressing))
			},
		},
		{
			name: "timed out is not overwritten by the paused condition",
			d: func() *appsv1.Deployment {
				d := progressDeadline(newDeployment("web", 2, nil, intOrStr(1), intOrStr(0), labels))
				d.Spec.Paused = true
				d.Status.Conditions = []appsv1.DeploymentCondition{progressingCond(corev1.ConditionFalse, TimedOutReason, "x", metav1.NewTime(at(0)))}
				return d
			},
			rsList: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				return []*appsv1.ReplicaSet{live(d, "web-new", 2, "1")}
			},
			wantStep: StepPaused,
			check: func(t *testing.T, plan Plan, status appsv1.DeploymentStatus) {
				assert.Equal(t, TimedOutReason, GetDeploymentCondition(status, appsv1.DeploymentProgressing).Reason)
			},
		},
		{
			name: "scaling event mid rollout: proportional",
			d:    func() *appsv1.Deployment { return newDeployment("web", 20, nil, intOrStr(2), intOrStr(0), labels) },
			rsList: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				a, b := stale(d, "web-a", 6, "1"), live(d, "web-new", 6, "2")
				SetReplicasAnnotations(a, 10, 12)
				SetReplicasAnnotations(b, 10, 12)
				return []*appsv1.ReplicaSet{a, b}
			},
			wantStep: StepProportional,
			check: func(t *testing.T, plan Plan, status appsv1.DeploymentStatus) {
				assert.Equal(t, map[string]int32{"web-a": 11, "web-new": 11}, map[string]int32{plan.Scales[0].ReplicaSet: plan.Scales[0].To, plan.Scales[1].ReplicaSet: plan.Scales[1].To})
			},
		},
		{
			name: "existing new replica set with a stale revision is updated on its own",
			d:    func() *appsv1.Deployment { return newDeployment("web", 3, nil, intOrStr(1), intOrStr(0), labels) },
			rsList: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				return []*appsv1.ReplicaSet{live(d, "web-new", 1, "1"), stale(d, "web-a", 2, "2")}
			},
			wantStep: StepSyncRevision,
			check: func(t *testing.T, plan Plan, status appsv1.DeploymentStatus) {
				require.NotNil(t, plan.Update)
				assert.Equal(t, "web-new", plan.Update.Name)
				assert.Equal(t, "3", plan.Update.Annotations[RevisionAnnotation])
				assert.Equal(t, "1", plan.Update.Annotations[RevisionHistoryAnnotation])
				assert.Empty(t, plan.Scales, "nothing else in this sync")
				assert.False(t, plan.StatusChanged)
			},
		},
		{
			name: "existing new replica set found: FoundNewReplicaSet when no Progressing condition",
			d: func() *appsv1.Deployment {
				d := progressDeadline(newDeployment("web", 3, nil, intOrStr(1), intOrStr(0), labels))
				d.Status = appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 1, AvailableReplicas: 1}
				return d
			},
			rsList: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				r := live(d, "web-new", 3, "1")
				r.Status.ReadyReplicas, r.Status.AvailableReplicas = 1, 1
				return []*appsv1.ReplicaSet{r}
			},
			wantStep: StepWait,
			check: func(t *testing.T, plan Plan, status appsv1.DeploymentStatus) {
				want := progressingCond(corev1.ConditionTrue, FoundNewRSReason, `Found new replica set "web-new"`, nowT)
				assert.Equal(t, &want, GetDeploymentCondition(status, appsv1.DeploymentProgressing))
			},
		},
		{
			name: "hash collision bumps the collision count",
			d: func() *appsv1.Deployment {
				d := newDeployment("web", 3, nil, intOrStr(1), intOrStr(0), labels)
				d.Status.CollisionCount = ptrTo(int32(4))
				return d
			},
			rsList: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				wanted, _ := NewReplicaSetFor(d, nil)
				return []*appsv1.ReplicaSet{stale(d, wanted.Name, 3, "1")}
			},
			wantStep: StepHashCollision,
			check: func(t *testing.T, plan Plan, status appsv1.DeploymentStatus) {
				assert.True(t, plan.Empty())
				assert.Equal(t, ptrTo(int32(5)), status.CollisionCount)
				assert.True(t, plan.StatusChanged)
			},
		},
		{
			name: "recreate waits for old pods the caller still sees",
			d: func() *appsv1.Deployment {
				d := newDeployment("web", 3, nil, nil, nil, labels)
				d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
				return d
			},
			rsList: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				r := stale(d, "web-a", 0, "1")
				r.Status = appsv1.ReplicaSetStatus{ObservedGeneration: 1, TerminatingReplicas: ptrTo(int32(3))}
				return []*appsv1.ReplicaSet{r}
			},
			oldPodsRunning: true,
			wantStep:       StepRecreateWaitOldPodsGone,
			check: func(t *testing.T, plan Plan, status appsv1.DeploymentStatus) {
				assert.True(t, plan.Empty())
				assert.Equal(t, ptrTo(int32(3)), status.TerminatingReplicas)
			},
		},
		{
			name: "stuck rollout with unchanged status: requeue for the deadline",
			d: func() *appsv1.Deployment {
				d := progressDeadline(newDeployment("web", 3, nil, intOrStr(1), intOrStr(0), labels))
				d.Status = appsv1.DeploymentStatus{
					Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 1, AvailableReplicas: 1, UnavailableReplicas: 2, TerminatingReplicas: ptrTo(int32(0)),
					Conditions: []appsv1.DeploymentCondition{
						progressingCond(corev1.ConditionTrue, ReplicaSetUpdatedReason, `ReplicaSet "web-new" is progressing.`, metav1.NewTime(now.Add(-4*time.Minute))),
						{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: MinimumReplicasUnavailable, Message: "Deployment does not have minimum availability.", LastUpdateTime: metav1.NewTime(at(0)), LastTransitionTime: metav1.NewTime(at(0))},
					},
				}
				return d
			},
			rsList: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				r := live(d, "web-new", 3, "1")
				r.Status.ReadyReplicas, r.Status.AvailableReplicas = 1, 1
				return []*appsv1.ReplicaSet{r}
			},
			wantStep: StepWait,
			check: func(t *testing.T, plan Plan, status appsv1.DeploymentStatus) {
				assert.False(t, plan.StatusChanged)
				assert.Equal(t, 6*time.Minute+time.Second, plan.RequeueAfter)
			},
		},
		{
			name: "stuck beyond the deadline: ProgressDeadlineExceeded",
			d: func() *appsv1.Deployment {
				d := progressDeadline(newDeployment("web", 3, nil, intOrStr(1), intOrStr(0), labels))
				d.Status = appsv1.DeploymentStatus{
					Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 1, AvailableReplicas: 1,
					Conditions: []appsv1.DeploymentCondition{progressingCond(corev1.ConditionTrue, ReplicaSetUpdatedReason, "", metav1.NewTime(now.Add(-11*time.Minute)))},
				}
				return d
			},
			rsList: func(d *appsv1.Deployment) []*appsv1.ReplicaSet {
				r := live(d, "web-new", 3, "1")
				r.Status.ReadyReplicas, r.Status.AvailableReplicas = 1, 1
				return []*appsv1.ReplicaSet{r}
			},
			wantStep: StepWait,
			check: func(t *testing.T, plan Plan, status appsv1.DeploymentStatus) {
				want := progressingCond(corev1.ConditionFalse, TimedOutReason, `ReplicaSet "web-new" has timed out progressing.`, nowT)
				assert.Equal(t, &want, GetDeploymentCondition(status, appsv1.DeploymentProgressing))
				assert.Zero(t, plan.RequeueAfter)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.d()
			var rsList []*appsv1.ReplicaSet
			if tt.rsList != nil {
				rsList = tt.rsList(d)
			}
			beforeD, beforeRSs := d.DeepCopy(), deepCopies(rsList)

			plan, status, err := Sync(d, rsList, tt.oldPodsRunning, now)
			require.NoError(t, err)
			assert.Equal(t, beforeD, d, "deployment must not be mutated")
			requireUnchanged(t, beforeRSs, rsList)
			assert.Equal(t, tt.wantStep, plan.Step)
			if tt.check != nil {
				tt.check(t, plan, status)
			}
		})
	}
}

func TestSyncErrors(t *testing.T) {
	valid := func() *appsv1.Deployment {
		return newDeployment("web", 1, nil, nil, nil, map[string]string{"app": "web"})
	}
	tests := []struct {
		name string
		d    *appsv1.Deployment
	}{
		{"nil deployment", nil},
		{"no replicas", func() *appsv1.Deployment { d := valid(); d.Spec.Replicas = nil; return d }()},
		{"no selector", func() *appsv1.Deployment { d := valid(); d.Spec.Selector = nil; return d }()},
		{"rolling without parameters", func() *appsv1.Deployment { d := valid(); d.Spec.Strategy.RollingUpdate = nil; return d }()},
		{"unknown strategy", func() *appsv1.Deployment { d := valid(); d.Spec.Strategy.Type = "BlueGreen"; return d }()},
		{"invalid surge", func() *appsv1.Deployment { d := valid(); d.Spec.Strategy.RollingUpdate.MaxSurge = pct("?%"); return d }()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Sync(tt.d, nil, false, at(0))
			assert.Error(t, err)
		})
	}
}

// cluster is a tiny in-memory stand-in for the API server and the
// ReplicaSet controller, to drive Sync in a loop like a workflow would.
type cluster struct {
	t       *testing.T
	rss     map[string]*appsv1.ReplicaSet
	clock   int
	created int
}

func newCluster(t *testing.T) *cluster {
	return &cluster{t: t, rss: map[string]*appsv1.ReplicaSet{}}
}

func (c *cluster) list() []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, r := range c.rss {
		out = append(out, r.DeepCopy())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// apply performs a plan like a caller would.
func (c *cluster) apply(plan Plan) {
	c.t.Helper()
	if plan.Update != nil {
		require.Contains(c.t, c.rss, plan.Update.Name)
		c.rss[plan.Update.Name] = plan.Update.DeepCopy()
	}
	if plan.Create != nil {
		require.NotContains(c.t, c.rss, plan.Create.Name)
		r := plan.Create.DeepCopy()
		c.created++
		r.UID = types.UID(fmt.Sprintf("uid-%d", c.created))
		r.CreationTimestamp = metav1.NewTime(at(c.clock))
		r.Generation = 1
		c.rss[r.Name] = r
	}
	for _, op := range plan.Scales {
		require.Contains(c.t, c.rss, op.ReplicaSet)
		c.rss[op.ReplicaSet] = op.ApplyTo(c.rss[op.ReplicaSet])
	}
	for _, name := range plan.Deletes {
		require.Contains(c.t, c.rss, name)
		delete(c.rss, name)
	}
}

// settle lets the ReplicaSet controller catch up: pods exist and are
// available for every ReplicaSet.
func (c *cluster) settle() {
	for _, r := range c.rss {
		n := *r.Spec.Replicas
		r.Status = appsv1.ReplicaSetStatus{Replicas: n, FullyLabeledReplicas: n, ReadyReplicas: n, AvailableReplicas: n, ObservedGeneration: r.Generation, TerminatingReplicas: ptrTo(int32(0))}
	}
}

// drive syncs until StepComplete, checking the rolling-update bounds after
// every step, and returns the steps taken.
func drive(t *testing.T, c *cluster, d *appsv1.Deployment, maxSyncs int) []Step {
	t.Helper()
	var steps []Step
	replicas := *d.Spec.Replicas
	wasAvailable := GetAvailableReplicaCountForReplicaSets(c.list()) >= MinAvailable(d)
	for i := 0; i < maxSyncs; i++ {
		c.clock++
		plan, status, err := Sync(d, c.list(), false, at(c.clock))
		require.NoError(t, err)
		steps = append(steps, plan.Step)
		c.apply(plan)
		d.Status = status
		if plan.Step == StepComplete {
			require.True(t, plan.Empty())
			require.False(t, plan.StatusChanged)
			require.True(t, DeploymentComplete(d, &status))
			return steps
		}
		if IsRollingUpdate(d) {
			// Never more than spec.replicas+maxSurge pods; and once the
			// Deployment was available, the pods that stay available after
			// the scale downs never drop below spec.replicas-maxUnavailable.
			var total, stillAvailable int32
			for _, r := range c.list() {
				total += *r.Spec.Replicas
				stillAvailable += min(*r.Spec.Replicas, r.Status.AvailableReplicas)
			}
			require.LessOrEqual(t, total, replicas+MaxSurge(*d), "surge bound after %v", steps)
			if wasAvailable {
				require.GreaterOrEqual(t, stillAvailable, MinAvailable(d), "availability bound after %v", steps)
			}
		}
		c.settle()
	}
	t.Fatalf("no completion after %d syncs: %v", maxSyncs, steps)
	return nil
}

func TestSyncRollingUpdateConverges(t *testing.T) {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptrTo(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: hashTemplates(t)["nginx"],
		},
	}
	SetDeploymentDefaults(d) // 25%/25% → surge 1, unavailable 0
	d.Spec.RevisionHistoryLimit = ptrTo(int32(1))
	c := newCluster(t)

	steps := drive(t, c, d, 20)
	assert.Equal(t, []Step{StepCreateNew, StepWait, StepComplete}, steps)
	first := c.list()
	require.Len(t, first, 1)
	assert.Equal(t, "web-56ff5c7bd", first[0].Name, "upstream's name for this template")
	cond := GetDeploymentCondition(d.Status, appsv1.DeploymentProgressing)
	require.NotNil(t, cond)
	assert.Equal(t, NewRSAvailableReason, cond.Reason)

	// Roll out a new image: one direction per sync, within surge 1 / unavailable 0.
	d.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
	steps = drive(t, c, d, 30)
	assert.Equal(t, []Step{
		StepCreateNew, StepScaleDownOld, StepScaleUpNew, StepScaleDownOld, StepScaleUpNew, StepScaleDownOld, StepWait, StepComplete,
	}, steps)
	names := func() []string {
		var out []string
		for _, r := range c.list() {
			out = append(out, fmt.Sprintf("%s=%d@%s", r.Name, *r.Spec.Replicas, r.Annotations[RevisionAnnotation]))
		}
		return out
	}
	assert.Equal(t, []string{"web-56ff5c7bd=0@1", "web-7c8f888dbc=3@2"}, names())

	// A third template: revision 3. The status passed in is still the
	// complete one of revision 2, so (as upstream) history limit 1 removes
	// revision 1 in the very sync that creates revision 3.
	d.Spec.Template.Spec.Containers[0].Image = "nginx:1.29"
	plan, _, err := Sync(d, c.list(), false, at(80))
	require.NoError(t, err)
	assert.Equal(t, StepCreateNew, plan.Step)
	assert.Equal(t, []string{"web-56ff5c7bd"}, plan.Deletes)
	steps = drive(t, c, d, 30)
	assert.Equal(t, StepComplete, steps[len(steps)-1])
	require.Len(t, c.list(), 2)
	assert.NotContains(t, c.rss, "web-56ff5c7bd")

	// Undo to the previous template: the old ReplicaSet is reused with a new
	// revision and a revision history.
	d.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
	steps = drive(t, c, d, 30)
	assert.Equal(t, StepSyncRevision, steps[0])
	reused := c.rss["web-7c8f888dbc"]
	assert.Equal(t, "4", reused.Annotations[RevisionAnnotation])
	assert.Equal(t, "2", reused.Annotations[RevisionHistoryAnnotation])
	assert.Equal(t, int32(3), *reused.Spec.Replicas)
}

func TestSyncRollingUpdateLargerConverges(t *testing.T) {
	// 10 replicas, surge 3, unavailable 2: bounds are checked after each sync.
	d := newDeployment("api", 10, ptrTo(int32(2)), intOrStr(3), intOrStr(2), map[string]string{"app": "api"})
	c := newCluster(t)
	drive(t, c, d, 10)
	for i := 2; i <= 5; i++ {
		d.Spec.Template.Spec.Containers[0].Image = fmt.Sprintf("api:v%d", i)
		steps := drive(t, c, d, 40)
		// maxUnavailable 2: the sync that creates the new ReplicaSet already
		// scales the old one down.
		assert.Equal(t, StepScaleDownOld, steps[0], "rollout %d", i)
		assert.LessOrEqual(t, len(c.list()), 3, "history limit 2 + the new one")
	}
}

func TestSyncRecreateConverges(t *testing.T) {
	d := newDeployment("db", 2, ptrTo(int32(5)), nil, nil, map[string]string{"app": "db"})
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	c := newCluster(t)
	assert.Equal(t, []Step{StepRecreateScaleUpNew, StepWait, StepComplete}, drive(t, c, d, 10))

	d.Spec.Template.Spec.Containers[0].Image = "db:v2"
	var steps []Step
	for i, podsLeft := range []bool{false, true, false, false, false} {
		plan, status, err := Sync(d, c.list(), podsLeft, at(100+i))
		require.NoError(t, err)
		steps = append(steps, plan.Step)
		c.apply(plan)
		d.Status = status
		if plan.Step == StepRecreateScaleUpNew {
			// Never old and new pods at the same time.
			for _, r := range c.list() {
				if !EqualIgnoreHash(&r.Spec.Template, &d.Spec.Template) {
					assert.Zero(t, r.Status.Replicas)
				}
			}
		}
		c.settle()
	}
	assert.Equal(t, []Step{StepRecreateScaleDownOld, StepRecreateWaitOldPodsGone, StepRecreateScaleUpNew, StepWait, StepComplete}, steps)
}

func TestSyncScaleMidRollout(t *testing.T) {
	d := newDeployment("web", 10, nil, intOrStr(2), intOrStr(0), map[string]string{"app": "web"})
	c := newCluster(t)
	drive(t, c, d, 10)
	d.Spec.Template.Spec.Containers[0].Image = "web:v2"
	for i := 0; i < 3; i++ { // part of the way
		plan, status, err := Sync(d, c.list(), false, at(50+i))
		require.NoError(t, err)
		c.apply(plan)
		d.Status = status
		c.settle()
	}
	before := map[string]int32{}
	for _, r := range c.list() {
		before[r.Name] = *r.Spec.Replicas
	}
	require.Len(t, before, 2)

	d.Spec.Replicas = ptrTo(int32(20))
	plan, _, err := Sync(d, c.list(), false, at(60))
	require.NoError(t, err)
	assert.Equal(t, StepProportional, plan.Step)
	after := sizesAfter(c.list(), plan.Scales)
	var total int32
	for name, size := range after {
		assert.Greater(t, size, before[name], "every active replica set grows")
		total += size
	}
	assert.Equal(t, int32(22), total, "spec.replicas + maxSurge")
}

// TestSyncPausedCleanupOrder pins a subtle upstream behaviour found by
// differential testing: upstream's scale() leaves the old ReplicaSets sorted
// newest first before cleanup sorts them by revision, and with an unparsable
// revision that ordering is not transitive, so the starting order decides
// which ReplicaSets are deleted.
func TestSyncPausedCleanupOrder(t *testing.T) {
	d := newDeployment("web", 0, ptrTo(int32(1)), intOrStr(1), intOrStr(0), map[string]string{"app": "web"})
	d.Spec.Paused = true
	mk := func(name, revision string, m int) *appsv1.ReplicaSet {
		r := newReplicaSet(d, name, 0)
		r.Spec.Template.Spec.Containers[0].Image = "img:" + name
		r.CreationTimestamp = metav1.NewTime(at(m))
		return withRevision(r, revision)
	}
	rss := []*appsv1.ReplicaSet{mk("web-a", "5", 0), mk("web-b", "x", 1), mk("web-c", "2", 2)}

	plan, _, err := Sync(d, rss, false, at(10))
	require.NoError(t, err)
	assert.Equal(t, StepPaused, plan.Step)
	assert.Equal(t, []string{"web-b", "web-c"}, plan.Deletes)

	// Oldest first, as the rolling and recreate paths pass them, the same
	// ReplicaSets give another answer.
	assert.Equal(t, []string{"web-a", "web-b"}, CleanupDeployment(rss, d).Deletes)
}
