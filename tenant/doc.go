// Package tenant holds the pipeline's one ownership rule: who may read,
// continue, cancel, subscribe to, list or deduplicate a request, task,
// context, session or workflow execution.
//
// Every stored item has an owner: the principal it was accepted for, which
// ingress writes as the envelope's user_id (for tasks and sessions, the
// index record's principal). Ingress authenticates the caller before
// anything is published and, when authentication is enforced, the
// authenticated principal always wins over any user id the request claims.
// Readers are then checked with [Principal.Allows]:
//
//   - the owner may do everything with its own data (ids compared byte-exact);
//   - a principal with [RoleAudit] may read everyone's data, and one with
//     [RoleAdmin] may also continue and cancel it;
//   - anyone else is told the item does not exist, in the protocol's own
//     words (E2A 404, A2A/AgentVault -32001, ACP resource not found), and a
//     duplicate submission of someone else's id is a conflict that reveals
//     nothing of the other's data;
//   - when authentication is off (the none scheme alone), every caller is
//     the same anonymous principal and the rule lets everything through
//     ([Principal.Open]).
//
// The callers are ingress (duplicates, tasks, sessions, workflow
// executions), egress (GET /v1/requests/...) and the console; they reach the
// rule through this package only, so there is one place to read it.
package tenant
