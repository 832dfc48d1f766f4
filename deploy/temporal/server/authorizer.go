package main

import (
	"context"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/common/api"
	"go.temporal.io/server/common/authorization"
)

// operatorVerbs are the namespace APIs Temporal's default authorizer grants to every writer, which this cluster
// keeps for a namespace's admins: they end, erase, rewind or re-route workflows, or act on many at once. A
// writer (workers, the processor receiver) starts, signals, updates and queries workflows, polls and completes
// tasks, creates and updates the sweep schedule and makes its own build current on a first deploy; a leaked
// worker token can do none of the things below. Operators hold `<namespace>:admin`.
var operatorVerbs = map[string]bool{
	"TerminateWorkflowExecution":     true,
	"DeleteWorkflowExecution":        true,
	"ResetWorkflowExecution":         true,
	"RequestCancelWorkflowExecution": true,
	"StartBatchOperation":            true,
	"StopBatchOperation":             true,
	"UpdateWorkflowExecutionOptions": true,
	"DeleteSchedule":                 true,
	"PatchSchedule":                  true,
	"PauseActivity":                  true,
	"UnpauseActivity":                true,
	"ResetActivity":                  true,
	"UpdateActivityOptions":          true,
	"DeleteWorkerDeployment":         true,
	"DeleteWorkerDeploymentVersion":  true,
	"SetWorkerDeploymentManager":     true,
	"CreateWorkflowRule":             true,
	"DeleteWorkflowRule":             true,
	"TriggerWorkflowRule":            true,
	"UpdateTaskQueueConfig":          true,
	"UpdateWorkerConfig":             true,
}

// directoryReads are the two cluster-scoped reads the Web UI makes before it shows a namespace (its namespace list and
// the server's version). Temporal's default authorizer keeps them for system readers, which would make a per-namespace
// token useless in the UI; here any caller holding a role in some namespace may make them. They reveal the namespaces'
// names and settings and the cluster's version, nothing inside a namespace.
var directoryReads = map[string]bool{
	"ListNamespaces": true,
	"GetClusterInfo": true,
}

// holdSweeperAuthorizer is Temporal's default authorizer with operatorVerbs raised from write to admin and
// directoryReads open to every namespace member.
type holdSweeperAuthorizer struct {
	base authorization.Authorizer
}

func newHoldSweeperAuthorizer() authorization.Authorizer {
	return &holdSweeperAuthorizer{base: authorization.NewDefaultAuthorizer()}
}

func (a *holdSweeperAuthorizer) Authorize(ctx context.Context, claims *authorization.Claims, target *authorization.CallTarget) (authorization.Result, error) {
	result, err := a.base.Authorize(ctx, claims, target)
	if err != nil || claims == nil || !strings.HasPrefix(target.APIName, api.WorkflowServicePrefix) {
		return result, err
	}
	if result.Decision != authorization.DecisionAllow {
		if directoryReads[api.MethodName(target.APIName)] && memberOfSomeNamespace(claims) {
			return authorization.Result{Decision: authorization.DecisionAllow}, nil
		}
		return result, nil
	}
	if !operatorVerbs[api.MethodName(target.APIName)] || writerMayPatchSchedule(target.Request) {
		return result, nil
	}
	if (claims.System|claims.Namespaces[target.Namespace])&authorization.RoleAdmin != 0 {
		return result, nil
	}
	return authorization.Result{Decision: authorization.DecisionDeny, Reason: "hold-sweeper: " + api.MethodName(target.APIName) + " needs namespace admin"}, nil
}

func memberOfSomeNamespace(claims *authorization.Claims) bool {
	for _, role := range claims.Namespaces {
		if role&(authorization.RoleReader|authorization.RoleWriter|authorization.RoleAdmin) != 0 {
			return true
		}
	}
	return false
}

// writerMayPatchSchedule says whether a PatchSchedule is one of the schedule levers a writer (the admin API's own
// identity, acting for an operator it authenticated and audited) may pull: start one run now under SKIP ("sweep now":
// a sweep already running makes it a no-op), or only pause, or only unpause, the schedule with a note ("sweeps
// pause|resume": who and why, read back by "sweeps status"). Backfilling, or any two at once, stays a namespace admin's.
func writerMayPatchSchedule(request interface{}) bool {
	patch, ok := request.(*workflowservice.PatchScheduleRequest)
	if !ok || patch.GetPatch() == nil {
		return false
	}
	p := patch.GetPatch()
	if len(p.GetBackfillRequest()) != 0 {
		return false
	}
	trigger, pause, unpause := p.GetTriggerImmediately(), p.GetPause(), p.GetUnpause()
	switch {
	case trigger != nil:
		return trigger.GetOverlapPolicy() == enumspb.SCHEDULE_OVERLAP_POLICY_SKIP && pause == "" && unpause == ""
	case pause != "":
		return unpause == ""
	default:
		return unpause != ""
	}
}
