package rollout

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestSetDeploymentDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   appsv1.Deployment
		want appsv1.DeploymentSpec
	}{
		{
			name: "empty spec gets upstream defaults",
			in:   appsv1.Deployment{},
			want: appsv1.DeploymentSpec{
				Replicas: ptrTo(int32(1)),
				Strategy: appsv1.DeploymentStrategy{
					Type:          appsv1.RollingUpdateDeploymentStrategyType,
					RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: pct("25%"), MaxSurge: pct("25%")},
				},
				RevisionHistoryLimit:    ptrTo(int32(10)),
				ProgressDeadlineSeconds: ptrTo(int32(600)),
			},
		},
		{
			name: "recreate gets no rollingUpdate, set values are kept",
			in: appsv1.Deployment{Spec: appsv1.DeploymentSpec{
				Replicas:                ptrTo(int32(0)),
				Strategy:                appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
				RevisionHistoryLimit:    ptrTo(int32(0)),
				ProgressDeadlineSeconds: ptrTo(int32(30)),
			}},
			want: appsv1.DeploymentSpec{
				Replicas:                ptrTo(int32(0)),
				Strategy:                appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
				RevisionHistoryLimit:    ptrTo(int32(0)),
				ProgressDeadlineSeconds: ptrTo(int32(30)),
			},
		},
		{
			name: "partial rollingUpdate is completed",
			in: appsv1.Deployment{Spec: appsv1.DeploymentSpec{
				Strategy: appsv1.DeploymentStrategy{RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: intOrStr(0)}},
			}},
			want: appsv1.DeploymentSpec{
				Replicas: ptrTo(int32(1)),
				Strategy: appsv1.DeploymentStrategy{
					Type:          appsv1.RollingUpdateDeploymentStrategyType,
					RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: pct("25%"), MaxSurge: intOrStr(0)},
				},
				RevisionHistoryLimit:    ptrTo(int32(10)),
				ProgressDeadlineSeconds: ptrTo(int32(600)),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.in.DeepCopy()
			SetDeploymentDefaults(d)
			assert.Equal(t, tt.want, d.Spec)
		})
	}
}

func TestSetDeploymentRevision(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		revision    string
		wantChanged bool
	}{
		{"nil annotations", nil, "1", true},
		{"same revision", map[string]string{RevisionAnnotation: "3"}, "3", false},
		{"new revision", map[string]string{RevisionAnnotation: "3", "x": "y"}, "4", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Annotations: tt.annotations}}
			assert.Equal(t, tt.wantChanged, SetDeploymentRevision(d, tt.revision))
			assert.Equal(t, tt.revision, d.Annotations[RevisionAnnotation])
		})
	}
}

func TestRevisions(t *testing.T) {
	r := func(name, revision string) *appsv1.ReplicaSet {
		out := rs(name, 0, nil, noTimestamp)
		if revision != "-" {
			withRevision(out, revision)
		}
		return out
	}
	tests := []struct {
		name     string
		rss      []*appsv1.ReplicaSet
		wantMax  int64
		wantLast int64
	}{
		{"none", nil, 0, 0},
		{"one", []*appsv1.ReplicaSet{r("a", "4")}, 4, 0},
		{"unordered", []*appsv1.ReplicaSet{r("a", "2"), r("b", "7"), r("c", "5")}, 7, 5},
		{"repeated maximum counts twice", []*appsv1.ReplicaSet{r("a", "3"), r("b", "3")}, 3, 3},
		{"garbage, missing and nil are skipped", []*appsv1.ReplicaSet{r("a", "x"), r("b", "-"), nil, r("c", "2"), r("d", "1")}, 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.wantMax, MaxRevision(tt.rss))
			assert.Equal(t, tt.wantLast, LastRevision(tt.rss))
		})
	}
}

func TestRevision(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        int64
		wantErr     bool
	}{
		{"missing", nil, 0, false},
		{"set", map[string]string{RevisionAnnotation: "12"}, 12, false},
		{"garbage", map[string]string{RevisionAnnotation: "twelve"}, 0, true},
		{"empty", map[string]string{RevisionAnnotation: ""}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, obj := range []metav1.Object{
				&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Annotations: tt.annotations}},
				&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Annotations: tt.annotations}},
			} {
				got, err := Revision(obj)
				assert.Equal(t, tt.wantErr, err != nil)
				assert.Equal(t, tt.want, got)
			}
		})
	}
}

// TestAnnotationUtils is upstream's TestAnnotationUtils.
func TestAnnotationUtils(t *testing.T) {
	tDeployment := generateDeployment("nginx")
	tRS := generateRS(tDeployment)
	tDeployment.Annotations[RevisionAnnotation] = "1"

	t.Run("SetNewReplicaSetAnnotations", func(t *testing.T) {
		for i := 10; i < 20; i++ {
			next := fmt.Sprintf("%d", i+1)
			SetNewReplicaSetAnnotations(&tDeployment, &tRS, next, true, 5)
			if i >= 12 {
				assert.Equal(t, fmt.Sprintf("%d,%d", i-1, i), tRS.Annotations[RevisionHistoryAnnotation])
			}
			assert.Equal(t, next, tRS.Annotations[RevisionAnnotation])
		}
	})

	t.Run("SetReplicasAnnotations", func(t *testing.T) {
		require.True(t, SetReplicasAnnotations(&tRS, 10, 11))
		assert.Equal(t, "10", tRS.Annotations[DesiredReplicasAnnotation])
		assert.Equal(t, "11", tRS.Annotations[MaxReplicasAnnotation])
		assert.False(t, SetReplicasAnnotations(&tRS, 10, 11), "second call changes nothing")
	})

	tRS.Annotations[DesiredReplicasAnnotation] = "1"
	tRS.Status.AvailableReplicas = 1
	tRS.Spec.Replicas = ptrTo(int32(1))
	t.Run("IsSaturated", func(t *testing.T) {
		assert.True(t, IsSaturated(&tDeployment, &tRS))
	})
}

func TestSetNewReplicaSetAnnotations(t *testing.T) {
	deployment := func(annotations map[string]string) *appsv1.Deployment {
		d := newDeployment("web", 4, nil, intOrStr(2), intOrStr(1), map[string]string{"app": "web"})
		d.Annotations = annotations
		return d
	}
	tests := []struct {
		name        string
		d           *appsv1.Deployment
		rsAnn       map[string]string
		newRevision string
		exists      bool
		limit       int
		wantChanged bool
		wantAnn     map[string]string
	}{
		{
			name:        "new replica set: copies annotations except skipped ones, sets revision and replicas annotations",
			d:           deployment(map[string]string{"team": "a", RevisionAnnotation: "9", corev1.LastAppliedConfigAnnotation: "{}", appsv1.DeprecatedRollbackTo: "1", DesiredReplicasAnnotation: "99"}),
			newRevision: "3",
			limit:       2000,
			wantChanged: true,
			wantAnn:     map[string]string{"team": "a", RevisionAnnotation: "3", DesiredReplicasAnnotation: "4", MaxReplicasAnnotation: "6"},
		},
		{
			name:        "existing, up to date: nothing changes",
			d:           deployment(map[string]string{"team": "a"}),
			rsAnn:       map[string]string{"team": "a", RevisionAnnotation: "3"},
			newRevision: "3",
			exists:      true,
			limit:       2000,
			wantChanged: false,
			wantAnn:     map[string]string{"team": "a", RevisionAnnotation: "3"},
		},
		{
			name:        "existing: revision never goes down",
			d:           deployment(nil),
			rsAnn:       map[string]string{RevisionAnnotation: "5"},
			newRevision: "3",
			exists:      true,
			limit:       2000,
			wantChanged: false,
			wantAnn:     map[string]string{RevisionAnnotation: "5"},
		},
		{
			name:        "existing reused by rollback: old revision goes to history",
			d:           deployment(nil),
			rsAnn:       map[string]string{RevisionAnnotation: "2", RevisionHistoryAnnotation: "1"},
			newRevision: "6",
			exists:      true,
			limit:       2000,
			wantChanged: true,
			wantAnn:     map[string]string{RevisionAnnotation: "6", RevisionHistoryAnnotation: "1,2"},
		},
		{
			name:        "history that cannot fit even the new entry is left alone",
			d:           deployment(nil),
			rsAnn:       map[string]string{RevisionAnnotation: "123", RevisionHistoryAnnotation: "7"},
			newRevision: "200",
			exists:      true,
			limit:       2,
			wantChanged: true,
			wantAnn:     map[string]string{RevisionAnnotation: "200", RevisionHistoryAnnotation: "7"},
		},
		{
			name:        "garbage revision on the replica set: no change reported",
			d:           deployment(map[string]string{"team": "a"}),
			rsAnn:       map[string]string{RevisionAnnotation: "x"},
			newRevision: "3",
			exists:      true,
			limit:       2000,
			wantChanged: false,
			wantAnn:     map[string]string{"team": "a", RevisionAnnotation: "x"},
		},
		{
			name:        "garbage new revision: no change reported",
			d:           deployment(nil),
			rsAnn:       map[string]string{RevisionAnnotation: "1"},
			newRevision: "y",
			exists:      true,
			limit:       2000,
			wantChanged: false,
			wantAnn:     map[string]string{RevisionAnnotation: "1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rs("web-1", 0, nil, noTimestamp)
			r.Annotations = tt.rsAnn
			got := SetNewReplicaSetAnnotations(tt.d, r, tt.newRevision, tt.exists, tt.limit)
			assert.Equal(t, tt.wantChanged, got)
			assert.Equal(t, tt.wantAnn, r.Annotations)
		})
	}
}

func TestSetDeploymentAnnotationsTo(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		"change-cause": "edit", RevisionAnnotation: "4", corev1.LastAppliedConfigAnnotation: "{}", "only-on-deployment": "x",
	}}}
	target := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		"change-cause": "create", RevisionAnnotation: "1", DesiredReplicasAnnotation: "3", MaxReplicasAnnotation: "4",
	}}}
	SetDeploymentAnnotationsTo(d, target)
	assert.Equal(t, map[string]string{
		"change-cause": "create", RevisionAnnotation: "4", corev1.LastAppliedConfigAnnotation: "{}",
	}, d.Annotations)
}

// TestReplicasAnnotationsNeedUpdate is upstream's table.
func TestReplicasAnnotationsNeedUpdate(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		expected    bool
	}{
		{"test Annotations nil", nil, true},
		{"test desiredReplicas update", map[string]string{DesiredReplicasAnnotation: "8", MaxReplicasAnnotation: "20"}, true},
		{"test maxReplicas update", map[string]string{DesiredReplicasAnnotation: "10", MaxReplicasAnnotation: "16"}, true},
		{"test needn't update", map[string]string{DesiredReplicasAnnotation: "10", MaxReplicasAnnotation: "20"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "test", Annotations: tt.annotations}}
			assert.Equal(t, tt.expected, ReplicasAnnotationsNeedUpdate(r, 10, 20))
			// SetReplicasAnnotations agrees and afterwards nothing is needed.
			assert.Equal(t, tt.expected, SetReplicasAnnotations(r, 10, 20))
			assert.False(t, ReplicasAnnotationsNeedUpdate(r, 10, 20))
		})
	}
}

// TestGetNonNegativeInt32FromAnnotation is upstream's table, also checking
// GetDesiredReplicasAnnotation on the same values.
func TestGetNonNegativeInt32FromAnnotation(t *testing.T) {
	tests := []struct {
		name          string
		value         *string
		expectedValue int32
		expectedValid bool
		expectedErr   string
	}{
		{name: "invalid empty"},
		{name: "invalid", value: ptrTo("invalid"), expectedErr: "invalid syntax"},
		{name: "invalid negative ", value: ptrTo("-1"), expectedErr: "invalid syntax"},
		{name: "valid zero", value: ptrTo("0"), expectedValue: 0, expectedValid: true},
		{name: "valid", value: ptrTo("13"), expectedValue: 13, expectedValid: true},
		{name: "valid max", value: ptrTo(fmt.Sprintf("%d", math.MaxInt32)), expectedValue: math.MaxInt32, expectedValid: true},
		{name: "invalid max out of range", value: ptrTo(fmt.Sprintf("%d", uint32(math.MaxInt32)+1)), expectedErr: "out of range"},
		{name: "invalid max out of range 2", value: ptrTo(fmt.Sprintf("%d", uint64(math.MaxUint32)+1)), expectedErr: "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := generateRS(generateDeployment("nginx"))
			if tt.value != nil {
				r.Annotations = map[string]string{"test": *tt.value, DesiredReplicasAnnotation: *tt.value, "foo": "2"}
			}
			value, valid, err := getNonNegativeInt32FromAnnotation(&r, "test")
			assert.Equal(t, tt.expectedValue, value)
			assert.Equal(t, tt.expectedValid, valid)
			if tt.expectedErr == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tt.expectedErr)
			}
			value, valid = GetDesiredReplicasAnnotation(&r)
			assert.Equal(t, tt.expectedValue, value)
			assert.Equal(t, tt.expectedValid, valid)
		})
	}
}

// TestResolveFenceposts is upstream's table plus integer inputs.
func TestResolveFenceposts(t *testing.T) {
	tests := []struct {
		maxSurge, maxUnavailable       *intstr.IntOrString
		desired                        int32
		expectSurge, expectUnavailable int32
		expectError                    bool
	}{
		{pct("0%"), pct("0%"), 0, 0, 1, false},
		{pct("39%"), pct("39%"), 10, 4, 3, false},
		{pct("oops"), pct("39%"), 10, 0, 0, true},
		{pct("55%"), pct("urg"), 10, 0, 0, true},
		{nil, pct("39%"), 10, 0, 3, false},
		{pct("39%"), nil, 10, 4, 0, false},
		{nil, nil, 10, 0, 1, false},
		// Ours: surge rounds up, unavailable rounds down.
		{pct("25%"), pct("25%"), 3, 1, 0, false},
		{pct("1%"), pct("1%"), 2, 1, 0, false},
		{pct("0%"), pct("1%"), 2, 0, 1, false},
		{intOrStr(0), intOrStr(0), 5, 0, 1, false},
		{intOrStr(3), intOrStr(2), 10, 3, 2, false},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			surge, unavailable, err := ResolveFenceposts(tt.maxSurge, tt.maxUnavailable, tt.desired)
			assert.Equal(t, tt.expectError, err != nil, "error: %v", err)
			assert.Equal(t, tt.expectSurge, surge)
			assert.Equal(t, tt.expectUnavailable, unavailable)
		})
	}
}

func rollingDeployment(replicas int32, maxSurge, maxUnavailable intstr.IntOrString) appsv1.Deployment {
	return appsv1.Deployment{Spec: appsv1.DeploymentSpec{
		Replicas: ptrTo(replicas),
		Strategy: appsv1.DeploymentStrategy{
			Type:          appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &maxSurge, MaxUnavailable: &maxUnavailable},
		},
	}}
}

var recreateDeployment = appsv1.Deployment{Spec: appsv1.DeploymentSpec{
	Replicas: ptrTo(int32(10)),
	Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
}}

// TestMaxUnavailable is upstream's table (maxSurge 1).
func TestMaxUnavailable(t *testing.T) {
	tests := []struct {
		name       string
		deployment appsv1.Deployment
		expected   int32
	}{
		{"maxUnavailable less than replicas", rollingDeployment(10, intstr.FromInt32(1), intstr.FromInt32(5)), 5},
		{"maxUnavailable equal replicas", rollingDeployment(10, intstr.FromInt32(1), intstr.FromInt32(10)), 10},
		{"maxUnavailable greater than replicas", rollingDeployment(5, intstr.FromInt32(1), intstr.FromInt32(10)), 5},
		{"maxUnavailable with replicas is 0", rollingDeployment(0, intstr.FromInt32(1), intstr.FromInt32(10)), 0},
		{"maxUnavailable with Recreate deployment strategy", recreateDeployment, 0},
		{"maxUnavailable less than replicas with percents", rollingDeployment(10, intstr.FromInt32(1), intstr.FromString("50%")), 5},
		{"maxUnavailable equal replicas with percents", rollingDeployment(10, intstr.FromInt32(1), intstr.FromString("100%")), 10},
		{"maxUnavailable greater than replicas with percents", rollingDeployment(5, intstr.FromInt32(1), intstr.FromString("100%")), 5},
		// Ours: 0/0 resolves to 1, rounding down.
		{"zero surge and zero unavailable", rollingDeployment(10, intstr.FromInt32(0), intstr.FromInt32(0)), 1},
		{"percent rounds down", rollingDeployment(3, intstr.FromString("25%"), intstr.FromString("25%")), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.expected, MaxUnavailable(tt.deployment))
		})
	}
}

// TestMinAvailable is upstream's table (maxSurge 1).
func TestMinAvailable(t *testing.T) {
	tests := []struct {
		name       string
		deployment appsv1.Deployment
		expected   int32
	}{
		{"replicas greater than maxUnavailable", rollingDeployment(10, intstr.FromInt32(1), intstr.FromInt32(5)), 5},
		{"replicas equal maxUnavailable", rollingDeployment(10, intstr.FromInt32(1), intstr.FromInt32(10)), 0},
		{"replicas less than maxUnavailable", rollingDeployment(5, intstr.FromInt32(1), intstr.FromInt32(10)), 0},
		{"replicas is 0", rollingDeployment(0, intstr.FromInt32(1), intstr.FromInt32(10)), 0},
		{"minAvailable with Recreate deployment strategy", recreateDeployment, 0},
		{"replicas greater than maxUnavailable with percents", rollingDeployment(10, intstr.FromInt32(1), intstr.FromString("60%")), 4},
		{"replicas equal maxUnavailable with percents", rollingDeployment(10, intstr.FromInt32(1), intstr.FromString("100%")), 0},
		{"replicas less than maxUnavailable with percents", rollingDeployment(5, intstr.FromInt32(1), intstr.FromString("100%")), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.expected, MinAvailable(&tt.deployment))
		})
	}
}

func TestMaxSurge(t *testing.T) {
	tests := []struct {
		name       string
		deployment appsv1.Deployment
		expected   int32
	}{
		{"absolute", rollingDeployment(10, intstr.FromInt32(3), intstr.FromInt32(0)), 3},
		{"percent rounds up", rollingDeployment(10, intstr.FromString("25%"), intstr.FromInt32(0)), 3},
		{"percent of 1 rounds up to 1", rollingDeployment(1, intstr.FromString("1%"), intstr.FromInt32(0)), 1},
		{"zero replicas", rollingDeployment(0, intstr.FromString("25%"), intstr.FromInt32(0)), 0},
		{"recreate", recreateDeployment, 0},
		{"invalid percent is ignored as upstream", rollingDeployment(10, intstr.FromString("x%"), intstr.FromInt32(0)), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.expected, MaxSurge(tt.deployment))
		})
	}
}

func TestIsRollingUpdate(t *testing.T) {
	rolling := rollingDeployment(1, intstr.FromInt32(1), intstr.FromInt32(0))
	assert.True(t, IsRollingUpdate(&rolling))
	assert.False(t, IsRollingUpdate(&recreateDeployment))
	assert.False(t, IsRollingUpdate(&appsv1.Deployment{}))
}

// TestNewRSNewReplicas is upstream's table (other RS has 5 replicas) plus
// error cases.
func TestNewRSNewReplicas(t *testing.T) {
	tests := []struct {
		name          string
		strategyType  appsv1.DeploymentStrategyType
		depReplicas   int32
		newRSReplicas int32
		maxSurge      intstr.IntOrString
		expected      int32
		wantErr       bool
	}{
		{"can not scale up - to newRSReplicas", appsv1.RollingUpdateDeploymentStrategyType, 1, 5, intstr.FromInt32(1), 5, false},
		{"scale up - to depReplicas", appsv1.RollingUpdateDeploymentStrategyType, 6, 2, intstr.FromInt32(10), 6, false},
		{"recreate - to depReplicas", appsv1.RecreateDeploymentStrategyType, 3, 1, intstr.FromInt32(1), 3, false},
		// Ours.
		{"scale up - limited by surge", appsv1.RollingUpdateDeploymentStrategyType, 10, 0, intstr.FromInt32(2), 7, false},
		{"scale up - percent surge rounds up", appsv1.RollingUpdateDeploymentStrategyType, 10, 0, intstr.FromString("1%"), 6, false},
		{"bad surge", appsv1.RollingUpdateDeploymentStrategyType, 10, 0, intstr.FromString("oops"), 0, true},
		{"unknown strategy", "Canary", 10, 0, intstr.FromInt32(1), 0, true},
	}
	d := generateDeployment("nginx")
	newRS := generateRS(d)
	rs5 := generateRS(d)
	rs5.Spec.Replicas = ptrTo(int32(5))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d.Spec.Replicas = ptrTo(tt.depReplicas)
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: tt.strategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: intOrStr(1),
				MaxSurge:       ptrTo(tt.maxSurge),
			}}
			newRS.Spec.Replicas = ptrTo(tt.newRSReplicas)
			got, err := NewRSNewReplicas(&d, []*appsv1.ReplicaSet{&rs5}, &newRS)
			assert.Equal(t, tt.wantErr, err != nil, "error: %v", err)
			assert.Equal(t, tt.expected, got)
		})
	}
}

func TestIsSaturated(t *testing.T) {
	d := newDeployment("foo", 3, nil, nil, nil, nil)
	saturated := func(mutate func(*appsv1.ReplicaSet)) *appsv1.ReplicaSet {
		r := rs("foo-1", 3, nil, noTimestamp)
		r.Annotations = map[string]string{DesiredReplicasAnnotation: "3"}
		r.Status.AvailableReplicas = 3
		if mutate != nil {
			mutate(r)
		}
		return r
	}
	tests := []struct {
		name string
		rs   *appsv1.ReplicaSet
		want bool
	}{
		{"nil", nil, false},
		{"saturated", saturated(nil), true},
		{"size differs", saturated(func(r *appsv1.ReplicaSet) { r.Spec.Replicas = ptrTo(int32(2)) }), false},
		{"annotation differs", saturated(func(r *appsv1.ReplicaSet) { r.Annotations[DesiredReplicasAnnotation] = "4" }), false},
		{"annotation missing", saturated(func(r *appsv1.ReplicaSet) { r.Annotations = nil }), false},
		{"not all available", saturated(func(r *appsv1.ReplicaSet) { r.Status.AvailableReplicas = 2 }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, IsSaturated(d, tt.rs))
		})
	}
}

// TestGetReplicaSetFraction is upstream's table (maxUnavailable 1).
func TestGetReplicaSetFraction(t *testing.T) {
	tests := []struct {
		name                     string
		deploymentReplicas       int32
		deploymentStatusReplicas int32
		deploymentMaxSurge       int32
		rsReplicas               int32
		rsAnnotations            map[string]string
		expectedFraction         int32
	}{
		{name: "empty deployment always scales to 0", deploymentReplicas: 0, rsReplicas: 10, expectedFraction: -10},
		{name: "unsynced deployment does not scale when max-replicas annotation is missing (removed by a 3rd party)", deploymentReplicas: 10, rsReplicas: 5, expectedFraction: 0},
		{name: "unsynced deployment does not scale when max-replicas annotation is incorrectly set to 0 (by a 3rd party)", deploymentReplicas: 10, rsReplicas: 5, rsAnnotations: map[string]string{MaxReplicasAnnotation: "0"}, expectedFraction: 0},
		{name: "scale up by 1/5 should increase RS replicas by 1/5 when max-replicas annotation is missing (removed by a 3rd party)", deploymentReplicas: 120, deploymentStatusReplicas: 100, rsReplicas: 50, expectedFraction: 10},
		{name: "scale up by 1/5 should increase RS replicas by 1/5 when max-replicas annotation is incorrectly set to 0 (by a 3rd party)", deploymentReplicas: 120, deploymentStatusReplicas: 100, rsReplicas: 50, rsAnnotations: map[string]string{MaxReplicasAnnotation: "0"}, expectedFraction: 10},
		{name: "scale up by 1/5 should increase RS replicas by 1/5", deploymentReplicas: 120, rsReplicas: 50, rsAnnotations: map[string]string{MaxReplicasAnnotation: "100"}, expectedFraction: 10},
		{name: "scale up with maxSurge by 1/5 should increase RS replicas approximately by 1/5", deploymentReplicas: 120, deploymentMaxSurge: 10, rsReplicas: 50, rsAnnotations: map[string]string{MaxReplicasAnnotation: "110"}, expectedFraction: 9},
		{name: "scale down by 1/6 should decrease RS replicas by 1/6", deploymentReplicas: 10, rsReplicas: 6, rsAnnotations: map[string]string{MaxReplicasAnnotation: "12"}, expectedFraction: -1},
		{name: "scale down with maxSurge by 1/6 should decrease RS replicas approximately by 1/6", deploymentReplicas: 100, deploymentMaxSurge: 10, rsReplicas: 50, rsAnnotations: map[string]string{MaxReplicasAnnotation: "130"}, expectedFraction: -8},
		// Ours: halves round away from zero.
		{name: "half rounds up", deploymentReplicas: 3, rsReplicas: 1, rsAnnotations: map[string]string{MaxReplicasAnnotation: "2"}, expectedFraction: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := generateDeployment("nginx")
			d.Status.Replicas = tt.deploymentStatusReplicas
			d.Spec.Replicas = ptrTo(tt.deploymentReplicas)
			d.Spec.Strategy = appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: intOrStr(tt.deploymentMaxSurge), MaxUnavailable: intOrStr(1)},
			}
			r := generateRS(d)
			r.Annotations = tt.rsAnnotations
			r.Spec.Replicas = ptrTo(tt.rsReplicas)
			assert.Equal(t, tt.expectedFraction, getReplicaSetFraction(r, d))
		})
	}
}

func TestGetReplicaSetProportion(t *testing.T) {
	// Deployment grown from 10 to 20 (no surge): each RS's fraction doubles it.
	d := *newDeployment("foo", 20, nil, nil, nil, nil)
	sized := func(n int32) *appsv1.ReplicaSet {
		r := rs("foo-1", n, nil, noTimestamp)
		r.Annotations = map[string]string{MaxReplicasAnnotation: "10"}
		return r
	}
	shrunk := *newDeployment("foo", 5, nil, nil, nil, nil)
	tests := []struct {
		name         string
		rs           *appsv1.ReplicaSet
		d            appsv1.Deployment
		toAdd, added int32
		want         int32
	}{
		{"nil replica set", nil, d, 10, 0, 0},
		{"empty replica set never grows", sized(0), d, 10, 0, 0},
		{"nothing to add", sized(4), d, 0, 0, 0},
		{"everything already added", sized(4), d, 10, 10, 0},
		{"fraction below what is left", sized(4), d, 10, 0, 4},
		{"capped by what is left", sized(4), d, 10, 8, 2},
		{"shrinking: fraction", sized(4), shrunk, -5, 0, -2},
		{"shrinking: capped by what is left", sized(4), shrunk, -5, -4, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, GetReplicaSetProportion(tt.rs, tt.d, tt.toAdd, tt.added))
		})
	}
}

// TestGetReplicaCountForReplicaSets is upstream's table, extended with the
// ready and available sums.
func TestGetReplicaCountForReplicaSets(t *testing.T) {
	rs1 := generateRS(generateDeployment("foo-rs"))
	rs1.Status.ObservedGeneration = 1
	rs1.Spec.Replicas = ptrTo(int32(1))
	rs1.Status.Replicas = 2
	rs1.Status.TerminatingReplicas = ptrTo(int32(3))
	rs1.Status.ReadyReplicas, rs1.Status.AvailableReplicas = 2, 1

	rs2 := generateRS(generateDeployment("bar-rs"))
	rs2.Spec.Replicas = ptrTo(int32(2))
	rs2.Status.Replicas = 3
	rs2.Status.TerminatingReplicas = ptrTo(int32(1))
	rs2.Status.ReadyReplicas, rs2.Status.AvailableReplicas = 3, 3

	rs3 := generateRS(generateDeployment("unsynced-rs"))
	rs3.Spec.Replicas = ptrTo(int32(3))

	rs4 := generateRS(generateDeployment("dropped-rs"))
	rs4.Status.ObservedGeneration = 1
	rs4.Spec.Replicas = ptrTo(int32(1))
	rs4.Status.Replicas = 1

	tests := []struct {
		name                           string
		sets                           []*appsv1.ReplicaSet
		count, actual, ready, availabl int32
		terminating                    *int32
	}{
		{"scaling down rs1", []*appsv1.ReplicaSet{&rs1}, 1, 2, 2, 1, ptrTo(int32(3))},
		{"scaling down rs1 and rs2", []*appsv1.ReplicaSet{&rs1, &rs2}, 3, 5, 5, 4, ptrTo(int32(4))},
		{"scaling up rs3", []*appsv1.ReplicaSet{&rs3}, 3, 0, 0, 0, ptrTo(int32(0))},
		{"scaling down rs1 and rs2 and scaling up rs3", []*appsv1.ReplicaSet{&rs1, &rs2, &rs3}, 6, 5, 5, 4, ptrTo(int32(4))},
		{"invalid/unknown terminating status for rs4", []*appsv1.ReplicaSet{&rs4}, 1, 1, 0, 0, nil},
		{"invalid/unknown terminating status for rs4 with rs1, rs2 and rs3", []*appsv1.ReplicaSet{&rs1, &rs2, &rs3, &rs4}, 7, 6, 5, 4, nil},
		{"nil entries are ignored", []*appsv1.ReplicaSet{nil, &rs1, nil}, 1, 2, 2, 1, ptrTo(int32(3))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.count, GetReplicaCountForReplicaSets(tt.sets))
			assert.Equal(t, tt.actual, GetActualReplicaCountForReplicaSets(tt.sets))
			assert.Equal(t, tt.ready, GetReadyReplicaCountForReplicaSets(tt.sets))
			assert.Equal(t, tt.availabl, GetAvailableReplicaCountForReplicaSets(tt.sets))
			assert.Equal(t, tt.terminating, GetTerminatingReplicaCountForReplicaSets(tt.sets))
		})
	}
}

func generatePodTemplateSpec(name, nodeName string, annotations, labels map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations, Labels: labels},
		Spec:       corev1.PodSpec{NodeName: nodeName},
	}
}

// TestEqualIgnoreHash is upstream's table; both argument orders are checked
// and the inputs must not change.
func TestEqualIgnoreHash(t *testing.T) {
	const hash = appsv1.DefaultDeploymentUniqueLabelKey
	tests := []struct {
		name           string
		former, latter corev1.PodTemplateSpec
		expected       bool
	}{
		{"Same spec, same labels",
			generatePodTemplateSpec("foo", "foo-node", map[string]string{}, map[string]string{hash: "value-1", "something": "else"}),
			generatePodTemplateSpec("foo", "foo-node", map[string]string{}, map[string]string{hash: "value-1", "something": "else"}), true},
		{"Same spec, only pod-template-hash label value is different",
			generatePodTemplateSpec("foo", "foo-node", map[string]string{}, map[string]string{hash: "value-1", "something": "else"}),
			generatePodTemplateSpec("foo", "foo-node", map[string]string{}, map[string]string{hash: "value-2", "something": "else"}), true},
		{"Same spec, the former doesn't have pod-template-hash label",
			generatePodTemplateSpec("foo", "foo-node", map[string]string{}, map[string]string{"something": "else"}),
			generatePodTemplateSpec("foo", "foo-node", map[string]string{}, map[string]string{hash: "value-2", "something": "else"}), true},
		{"Same spec, the label is different, the former doesn't have pod-template-hash label, same number of labels",
			generatePodTemplateSpec("foo", "foo-node", map[string]string{}, map[string]string{"something": "else"}),
			generatePodTemplateSpec("foo", "foo-node", map[string]string{}, map[string]string{hash: "value-2"}), false},
		{"Same spec, the label is different, the latter doesn't have pod-template-hash label, same number of labels",
			generatePodTemplateSpec("foo", "foo-node", map[string]string{}, map[string]string{hash: "value-1"}),
			generatePodTemplateSpec("foo", "foo-node", map[string]string{}, map[string]string{"something": "else"}), false},
		{"Same spec, the label is different, and the pod-template-hash label value is the same",
			generatePodTemplateSpec("foo", "foo-node", map[string]string{}, map[string]string{hash: "value-1"}),
			generatePodTemplateSpec("foo", "foo-node", map[string]string{}, map[string]string{hash: "value-1", "something": "else"}), false},
		{"Different spec, same labels",
			generatePodTemplateSpec("foo", "foo-node", map[string]string{"former": "value"}, map[string]string{hash: "value-1", "something": "else"}),
			generatePodTemplateSpec("foo", "foo-node", map[string]string{"latter": "value"}, map[string]string{hash: "value-1", "something": "else"}), false},
		{"Different spec, different pod-template-hash label value",
			generatePodTemplateSpec("foo-1", "foo-node", map[string]string{}, map[string]string{hash: "value-1", "something": "else"}),
			generatePodTemplateSpec("foo-2", "foo-node", map[string]string{}, map[string]string{hash: "value-2", "something": "else"}), false},
		{"Different spec, the former doesn't have pod-template-hash label",
			generatePodTemplateSpec("foo-1", "foo-node-1", map[string]string{}, map[string]string{"something": "else"}),
			generatePodTemplateSpec("foo-2", "foo-node-2", map[string]string{}, map[string]string{hash: "value-2", "something": "else"}), false},
		{"Different spec, different labels",
			generatePodTemplateSpec("foo", "foo-node-1", map[string]string{}, map[string]string{"something": "else"}),
			generatePodTemplateSpec("foo", "foo-node-2", map[string]string{}, map[string]string{"nothing": "else"}), false},
		// Ours: semantic equality (nil vs empty map).
		{"Nil and empty annotations are equal",
			generatePodTemplateSpec("foo", "n", nil, map[string]string{"a": "b"}),
			generatePodTemplateSpec("foo", "n", map[string]string{}, map[string]string{"a": "b"}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, pair := range [][2]corev1.PodTemplateSpec{{tt.former, tt.latter}, {tt.latter, tt.former}} {
				a, b := pair[0].DeepCopy(), pair[1].DeepCopy()
				assert.Equal(t, tt.expected, EqualIgnoreHash(a, b))
				assert.Equal(t, &pair[0], a)
				assert.Equal(t, &pair[1], b)
			}
		})
	}
}

func findFixtures() (d appsv1.Deployment, newRS, newRSDup, oldRS appsv1.ReplicaSet) {
	now := metav1.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	later := metav1.NewTime(now.Add(time.Minute))
	before := metav1.NewTime(now.Add(-time.Minute))

	d = generateDeployment("nginx")
	newRS = generateRS(d)
	newRS.Spec.Replicas = ptrTo(int32(1))
	newRS.Labels = map[string]string{"name": "nginx", appsv1.DefaultDeploymentUniqueLabelKey: "hash"}
	newRS.CreationTimestamp = later

	newRSDup = generateRS(d)
	newRSDup.Labels = map[string]string{"name": "nginx", appsv1.DefaultDeploymentUniqueLabelKey: "different-hash"}
	newRSDup.CreationTimestamp = now

	oldD := generateDeployment("nginx")
	oldD.Spec.Template.Spec.Containers[0].Name = "nginx-old-1"
	oldRS = generateRS(oldD)
	oldRS.CreationTimestamp = before
	return d, newRS, newRSDup, oldRS
}

// TestFindNewReplicaSet is upstream's table.
func TestFindNewReplicaSet(t *testing.T) {
	d, newRS, newRSDup, oldRS := findFixtures()
	tests := []struct {
		name     string
		rsList   []*appsv1.ReplicaSet
		expected *appsv1.ReplicaSet
	}{
		{"Get new ReplicaSet with the same template as Deployment spec but different pod-template-hash value", []*appsv1.ReplicaSet{&newRS, &oldRS}, &newRS},
		{"Get the oldest new ReplicaSet when there are more than one ReplicaSet with the same template", []*appsv1.ReplicaSet{&newRS, &oldRS, &newRSDup}, &newRSDup},
		{"Get nil new ReplicaSet", []*appsv1.ReplicaSet{&oldRS}, nil},
		{"Empty list", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			order := append([]*appsv1.ReplicaSet(nil), tt.rsList...)
			assert.Same(t, tt.expected, FindNewReplicaSet(&d, tt.rsList))
			assert.Equal(t, order, tt.rsList, "input order must be kept")
		})
	}
}

// TestFindOldReplicaSets is upstream's table; ours also fixes the order
// (oldest first).
func TestFindOldReplicaSets(t *testing.T) {
	d, newRS, newRSDup, oldRS := findFixtures()
	tests := []struct {
		name            string
		rsList          []*appsv1.ReplicaSet
		expected        []*appsv1.ReplicaSet
		expectedRequire []*appsv1.ReplicaSet
	}{
		{"Get old ReplicaSets", []*appsv1.ReplicaSet{&newRS, &oldRS}, []*appsv1.ReplicaSet{&oldRS}, nil},
		{"Get old ReplicaSets with no new ReplicaSet", []*appsv1.ReplicaSet{&oldRS}, []*appsv1.ReplicaSet{&oldRS}, nil},
		{"Get old ReplicaSets with two new ReplicaSets, only the oldest new ReplicaSet is seen as new ReplicaSet", []*appsv1.ReplicaSet{&oldRS, &newRS, &newRSDup}, []*appsv1.ReplicaSet{&oldRS, &newRS}, []*appsv1.ReplicaSet{&newRS}},
		{"Get empty old ReplicaSets", []*appsv1.ReplicaSet{&newRS}, nil, nil},
		{"Order is oldest first whatever the input order", []*appsv1.ReplicaSet{&newRS, &newRSDup, &oldRS}, []*appsv1.ReplicaSet{&oldRS, &newRS}, []*appsv1.ReplicaSet{&newRS}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			required, all := FindOldReplicaSets(&d, tt.rsList)
			assert.Equal(t, tt.expected, all)
			assert.Equal(t, tt.expectedRequire, required)
		})
	}
}

func TestFindOldReplicaSetsWithoutUIDs(t *testing.T) {
	d := newDeployment("foo", 1, nil, nil, nil, map[string]string{"a": "b"})
	cur := newReplicaSet(d, "foo-new", 1)
	other := newReplicaSet(d, "foo-old", 1)
	other.Spec.Template.Spec.Containers[0].Image = "old"
	cur.UID, other.UID = "", ""
	_, all := FindOldReplicaSets(d, []*appsv1.ReplicaSet{cur, other})
	assert.Equal(t, []*appsv1.ReplicaSet{other}, all)
}

func TestFindActiveOrLatest(t *testing.T) {
	t0, t1, t2 := metav1.NewTime(at(0)), metav1.NewTime(at(1)), metav1.NewTime(at(2))
	newRS := rs("new", 0, nil, t2)
	activeNew := rs("new", 3, nil, t2)
	older := rs("older", 0, nil, t0)
	old := rs("old", 0, nil, t1)
	activeOld := rs("old", 2, nil, t1)
	tests := []struct {
		name   string
		newRS  *appsv1.ReplicaSet
		oldRSs []*appsv1.ReplicaSet
		want   *appsv1.ReplicaSet
	}{
		{"nothing", nil, nil, nil},
		{"no active: the new one", newRS, []*appsv1.ReplicaSet{older, old}, newRS},
		{"no active, no new: the newest old one", nil, []*appsv1.ReplicaSet{old, older}, old},
		{"one active old", newRS, []*appsv1.ReplicaSet{older, activeOld}, activeOld},
		{"one active new", activeNew, []*appsv1.ReplicaSet{older, old}, activeNew},
		{"several active", activeNew, []*appsv1.ReplicaSet{activeOld}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			order := append([]*appsv1.ReplicaSet(nil), tt.oldRSs...)
			assert.Same(t, tt.want, FindActiveOrLatest(tt.newRS, tt.oldRSs))
			assert.Equal(t, order, tt.oldRSs)
		})
	}
}

func TestSetFromReplicaSetTemplate(t *testing.T) {
	d := newDeployment("foo", 1, nil, nil, nil, map[string]string{"app": "foo"})
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"app": "foo", appsv1.DefaultDeploymentUniqueLabelKey: "abc"},
			Annotations: map[string]string{"x": "y"},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Image: "old"}}},
	}
	original := template.DeepCopy()
	got := SetFromReplicaSetTemplate(d, template)
	assert.Same(t, d, got)
	assert.Equal(t, corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "foo"}, Annotations: map[string]string{"x": "y"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Image: "old"}}},
	}, d.Spec.Template)
	assert.Equal(t, original, &template, "template must not be modified")
}

func TestFilterActiveReplicaSets(t *testing.T) {
	a, b, c := rs("a", 1, nil, noTimestamp), rs("b", 0, nil, noTimestamp), rs("c", 4, nil, noTimestamp)
	assert.Equal(t, []*appsv1.ReplicaSet{a, c}, FilterActiveReplicaSets([]*appsv1.ReplicaSet{a, nil, b, c}))
	assert.Nil(t, FilterActiveReplicaSets([]*appsv1.ReplicaSet{b, nil}))
}

func TestReplicaSetOrderings(t *testing.T) {
	t0, t1 := metav1.NewTime(at(0)), metav1.NewTime(at(1))
	names := func(rss []*appsv1.ReplicaSet) string {
		var out []string
		for _, r := range rss {
			out = append(out, r.Name)
		}
		return strings.Join(out, ",")
	}
	mk := func() []*appsv1.ReplicaSet {
		return []*appsv1.ReplicaSet{
			withRevision(rs("b-new-2", 2, nil, t1), "3"),
			withRevision(rs("a-new-2", 2, nil, t1), "x"),
			withRevision(rs("c-old-5", 5, nil, t0), "1"),
			withRevision(rs("d-old-2", 2, nil, t0), "4"),
		}
	}
	tests := []struct {
		name  string
		order func([]*appsv1.ReplicaSet) sort.Interface
		want  string
	}{
		{"by creation timestamp, name breaks ties", func(r []*appsv1.ReplicaSet) sort.Interface { return ReplicaSetsByCreationTimestamp(r) }, "c-old-5,d-old-2,a-new-2,b-new-2"},
		{"by size, older first on ties", func(r []*appsv1.ReplicaSet) sort.Interface { return ReplicaSetsBySizeOlder(r) }, "c-old-5,d-old-2,a-new-2,b-new-2"},
		{"by size, newer first on ties", func(r []*appsv1.ReplicaSet) sort.Interface { return ReplicaSetsBySizeNewer(r) }, "c-old-5,b-new-2,a-new-2,d-old-2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rss := mk()
			sort.Sort(tt.order(rss))
			assert.Equal(t, tt.want, names(rss))
		})
	}

	t.Run("by revision", func(t *testing.T) {
		rss := []*appsv1.ReplicaSet{
			withRevision(rs("r3", 0, nil, t0), "3"),
			withRevision(rs("r1", 0, nil, t1), "1"),
			withRevision(rs("r2", 0, nil, t0), "2"),
		}
		sort.Sort(ReplicaSetsByRevision(rss))
		assert.Equal(t, "r1,r2,r3", names(rss))
	})
	t.Run("by revision, falls back to timestamp", func(t *testing.T) {
		rss := []*appsv1.ReplicaSet{
			withRevision(rs("late", 0, nil, t1), "x"),
			withRevision(rs("early", 0, nil, t0), "5"),
		}
		sort.Sort(ReplicaSetsByRevision(rss))
		assert.Equal(t, "early,late", names(rss))
	})
}
