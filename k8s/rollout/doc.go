// Package rollout holds the Kubernetes Deployment controller's rollout
// arithmetic as pure functions: no I/O, no Temporal.
//
// It reimplements, with the same behaviour, the decisions of
// k8s.io/kubernetes v1.36.3 pkg/controller/deployment and its util package,
// working on k8s.io/api/apps/v1 types. The desired state is an
// *appsv1.Deployment that is never created in a cluster; the live objects
// are *appsv1.ReplicaSets. Where upstream performs a write (create, update,
// scale or delete a ReplicaSet, update the Deployment status) this package
// returns it in a Plan instead; where upstream reads the clock, the time is
// an argument. Inputs are never modified.
//
// Files follow upstream's layout: util.go (deployment_util.go: counting,
// fenceposts, annotations, revisions, finding the new/old ReplicaSets),
// conditions.go, hash.go (controller.ComputeHash), rolling.go, recreate.go,
// sync.go (proportional scaling, history cleanup, status, the new
// ReplicaSet), progress.go, rollback.go and controller.go (syncDeployment).
//
// # Driving a rollout
//
// Sync does what one run of upstream's syncDeployment does. A caller (for
// example a workflow) loops:
//
//	d.Status = appsv1.DeploymentStatus{} // or the status saved last time
//	for {
//		rsList := listReplicaSets()          // all ReplicaSets of the Deployment
//		oldPods := anyOldPodStillRunning()   // only needed for Recreate; see OldPodsRunning
//		plan, status, err := rollout.Sync(d, rsList, oldPods, now())
//		if err != nil { ... }                // invalid spec
//		apply(plan)                          // Update/Create, Scales in order, Deletes, Deployment
//		d.Status = status                    // persist: the next Sync needs it
//		if plan.Deployment != nil {
//			d = plan.Deployment              // rollback: adopt the rolled back template
//		}
//		if plan.Step == rollout.StepComplete { break }
//		// Optionally stop on a Progressing condition with reason
//		// ProgressDeadlineExceeded; upstream reports it and keeps going.
//		if plan.Empty() && !plan.StatusChanged {
//			waitForReplicaSetOrPodChange(plan.RequeueAfter) // 0: no deadline check needed
//		}
//	}
//
// The caller supplies: the desired Deployment with spec.replicas and
// spec.selector set (SetDeploymentDefaults applies the API server defaults)
// and with the status returned by the previous Sync; the live ReplicaSets
// (their status is written by the ReplicaSet controller); whether old pods
// still run (Recreate only); and the current time.
//
// Each Sync takes exactly one decision, reported in Plan.Step: an existing
// new ReplicaSet's revision sync (StepSyncRevision), proportional scaling on
// a resize or while paused (StepProportional, StepPaused), a rollback
// (StepRollback), or one rollout step of the strategy: for RollingUpdate
// StepCreateNew, StepScaleUpNew / StepScaleDownNew, StepCleanupUnhealthy /
// StepScaleDownOld; for Recreate StepRecreateScaleDownOld,
// StepRecreateWaitOldPodsGone, StepRecreateScaleUpNew; and when nothing
// needs scaling StepCleanupHistory, StepWait or StepComplete. Upstream
// re-syncs after each of its own writes, so after applying a non-empty plan
// or getting StatusChanged the caller should Sync again right away.
//
// # Differences from upstream
//
//   - When the existing new ReplicaSet is stale (revision, copied
//     annotations, minReadySeconds), upstream updates it and then, on the
//     paused, rollback and deleting paths, carries on in the same sync; on
//     the normal path its second attempt at the same update in that sync
//     normally conflicts and ends the sync. Sync always stops after the
//     update (StepSyncRevision); the next Sync carries on.
//   - Events are not emitted; ScaleOp.Reason and Plan.Message carry their
//     text. The Deployment's own revision annotation is only returned with a
//     rollback (Plan.Deployment); it is the new ReplicaSet's revision.
//   - No owner references, adoption or orphaning: the caller decides which
//     ReplicaSets belong to the Deployment. A name clash with a ReplicaSet in
//     rsList is a hash collision (StepHashCollision bumps
//     status.collisionCount). If a create fails because a ReplicaSet outside
//     rsList has the name, bump status.collisionCount and Sync again.
//   - Functions that took a context or logger only for logging do not;
//     functions that read the clock take a now argument.
//   - Inputs, including slices, are never reordered or modified. Objects
//     without UIDs are matched by namespace/name.
//   - When the new ReplicaSet's revision annotation is not a number,
//     upstream copies the Deployment's annotations onto it in memory and
//     they reach the cluster only if the same sync scales that ReplicaSet;
//     ScaleOp never carries them.
//   - Status.terminatingReplicas is always computed (the
//     DeploymentReplicaSetTerminatingReplicas feature gate, on by default in
//     v1.36).
package rollout
