// Package api is the contract of deployflow's workflows: all that the CLI,
// the bench, the placement's activities and the tests know of them.
//
//   - ids.go: workflow IDs (one lease's workflow per lease and cluster, a
//     rollout per service) and the workflow types as registered;
//   - names.go: the query, update and signal names on the wire, one per
//     concept;
//   - lease.go, rollout.go, placement.go, plan.go, schedule.go: each
//     workflow's input, its updates' arguments, its status and phases;
//   - decode.go: the strict decoding of an input typed by hand (the
//     Temporal UI, `temporal workflow start --input`): what is wrong is
//     kept, naming each field, for the workflow or the update's validator
//     to refuse (Invalid);
//   - errors.go: the failure types a caller can match.
//
// A workflow's implementation state stays in package workflows: a
// continued run's carry is opaque bytes here (DeployInput.Carry,
// RolloutInput.Carry), decoded only by the workflow that wrote it.
package api
