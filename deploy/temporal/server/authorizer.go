package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/server/common/api"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
)

// clusterRightsJSON is the one table of who may call what (docs/security.md prints it; the cluster test checks every
// method against it as every caller).
//
//go:embed cluster-rights.json
var clusterRightsJSON []byte

// clusterRights is cluster-rights.json: per service and method, the callers that may call it.
type clusterRights struct {
	Callers  map[string]json.RawMessage              `json:"callers"`
	Narrowed map[string]map[string]map[string]string `json:"narrowed"`
	Methods  map[string]map[string][]string          `json:"methods"`
}

const (
	// anyone: every connection, with or without a token (the SDKs' health check).
	anyone = "anyone"
	// The callers a token's namespace role names, whatever its subject: the namespace's admins and its readers.
	operatorCaller = "operator"
	onCallCaller   = "on-call"
	adminAPICaller = "admin-api"
)

// The gRPC services the table governs, by their full names' prefixes.
var governedServices = map[string]string{
	api.WorkflowServicePrefix: "WorkflowService",
	api.OperatorServicePrefix: "OperatorService",
}

// holdSweeperAuthorizer allows a caller only the methods cluster-rights.json lists for it, within the namespaces its
// token's permissions name (Temporal's default authorizer still decides those). A service is named by its token's
// subject (`worker@hold-sweeper-us`: the part before the @); any other token is the namespace's operator when it holds
// `<namespace>:admin` there, on-call when it holds any other role. temporal-system roles are the cluster's own (its
// setup, and the internal-frontend's system workers, which it makes system admins): Temporal's rules alone.
type holdSweeperAuthorizer struct {
	base     authorization.Authorizer
	rights   clusterRights
	services map[string]bool
	logger   log.Logger
}

func newHoldSweeperAuthorizer(logger log.Logger) (authorization.Authorizer, error) {
	var rights clusterRights
	if err := json.Unmarshal(clusterRightsJSON, &rights); err != nil {
		return nil, fmt.Errorf("cluster-rights.json: %w", err)
	}
	services := map[string]bool{}
	for caller := range rights.Callers {
		if caller != anyone && caller != operatorCaller && caller != onCallCaller {
			services[caller] = true
		}
	}
	for service, methods := range rights.Methods {
		for method, callers := range methods {
			for _, caller := range callers {
				if _, known := rights.Callers[caller]; !known {
					return nil, fmt.Errorf("cluster-rights.json: %s/%s names %q, not among its callers", service, method, caller)
				}
			}
		}
	}
	// One narrowing exists, and the code below applies it; a table naming another would be a right nobody checks.
	for service, methods := range rights.Narrowed {
		for method, callers := range methods {
			for caller := range callers {
				if service != "WorkflowService" || method != "PatchSchedule" || caller != adminAPICaller {
					return nil, fmt.Errorf("cluster-rights.json narrows %s/%s for %s: only the admin API's PatchSchedule is narrowed (writerMayPatchSchedule)", service, method, caller)
				}
			}
		}
	}
	return &holdSweeperAuthorizer{base: authorization.NewDefaultAuthorizer(), rights: rights, services: services, logger: logger}, nil
}

func (a *holdSweeperAuthorizer) Authorize(ctx context.Context, claims *authorization.Claims, target *authorization.CallTarget) (authorization.Result, error) {
	result, err := a.base.Authorize(ctx, claims, target)
	service := ""
	for prefix, name := range governedServices {
		if strings.HasPrefix(target.APIName, prefix) {
			service = name
		}
	}
	if err != nil || claims == nil || service == "" || claims.System != authorization.RoleUndefined {
		return result, err
	}
	method := api.MethodName(target.APIName)
	allowed := a.rights.Methods[service][method]
	if contains(allowed, anyone) {
		return authorization.Result{Decision: authorization.DecisionAllow}, nil
	}
	clusterScoped := api.GetMethodMetadata(target.APIName).Scope == api.ScopeCluster
	caller := a.callerOf(claims, target.Namespace, clusterScoped)
	if caller == "" || !contains(allowed, caller) {
		return a.deny(caller, claims, target, method, "may not call it (deploy/temporal/server/cluster-rights.json)"), nil
	}
	if caller == adminAPICaller && method == "PatchSchedule" && !writerMayPatchSchedule(target.Request) {
		return a.deny(caller, claims, target, method, "may only trigger under SKIP, pause or unpause, one at a time"), nil
	}
	// The cluster's directory (its namespaces, its version) is the table's to grant to a namespace's members:
	// Temporal's rules keep it for system roles, which would make a per-namespace token useless in the Web UI.
	if clusterScoped {
		return authorization.Result{Decision: authorization.DecisionAllow}, nil
	}
	return result, nil
}

// callerOf names the caller a token is: a service by its subject, or the namespace's operator or on-call by its role
// in the target namespace (in any namespace, for a cluster-scoped method); "" when it is none of them.
func (a *holdSweeperAuthorizer) callerOf(claims *authorization.Claims, namespace string, clusterScoped bool) string {
	role := claims.Namespaces[namespace]
	if clusterScoped {
		role = authorization.RoleUndefined
		for _, r := range claims.Namespaces {
			role |= r
		}
	}
	if role == authorization.RoleUndefined {
		return ""
	}
	if service, _, _ := strings.Cut(claims.Subject, "@"); a.services[service] {
		return service
	}
	if role&authorization.RoleAdmin != 0 {
		return operatorCaller
	}
	return onCallCaller
}

// deny refuses the call with a reason the caller reads, and logs who tried: a stolen token probing shows in the log.
func (a *holdSweeperAuthorizer) deny(caller string, claims *authorization.Claims, target *authorization.CallTarget, method, why string) authorization.Result {
	who := caller
	if who == "" {
		who = "a token with no role in " + target.Namespace
	}
	a.logger.Warn("hold-sweeper authorizer refused a call",
		tag.NewStringTag("caller", who), tag.NewStringTag("subject", claims.Subject),
		tag.NewStringTag("method", method), tag.WorkflowNamespace(target.Namespace))
	return authorization.Result{Decision: authorization.DecisionDeny, Reason: "hold-sweeper: " + who + " " + why + ": " + method}
}

func contains(list []string, item string) bool {
	for _, entry := range list {
		if entry == item {
			return true
		}
	}
	return false
}

// writerMayPatchSchedule says whether a PatchSchedule is one of the schedule levers the admin API (acting for an
// operator it authenticated and audited) may pull: start one run now under SKIP ("sweep now": a sweep already running
// makes it a no-op), or only pause, or only unpause, the schedule with a note ("sweeps pause|resume": who and why,
// read back by "sweeps status"). Backfilling, or any two at once, stays a namespace admin's.
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
