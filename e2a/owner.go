package e2a

// DetailConversationOwner is the provenance.details key in which the
// pipeline's ingress names the principal that owns the task, A2A context or
// ACP session a request continues, when that is not the request's own
// user_id: an `admin` principal (tenant.RoleAdmin) answering or cancelling
// another principal's task. user_id stays the acting principal (the one
// authenticated); the owner is whose conversation the turn belongs to, the
// one a bridge keeps the upstream's ids and history under.
//
// Only the ingress writes it: it drops any value a client sent (a raw E2A
// envelope's provenance) before setting its own ([Envelope.SetOwner]), so
// an agent may trust it as it trusts user_id.
const DetailConversationOwner = "conversation_owner"

// Owner is the principal whose conversation e belongs to: the ingress's
// details[DetailConversationOwner] when set (a non-empty string), else
// e.UserID.
func (e *Envelope) Owner() string {
	if e.Provenance != nil {
		if o, ok := e.Provenance.Details[DetailConversationOwner].(string); ok && o != "" {
			return o
		}
	}
	return e.UserID
}

// SetOwner is the ingress's: it drops any details[DetailConversationOwner]
// e carries, then sets it to owner when owner is neither empty nor e.UserID
// (a turn of its own principal's conversation says nothing).
func (e *Envelope) SetOwner(owner string) {
	if e.Provenance != nil {
		delete(e.Provenance.Details, DetailConversationOwner)
	}
	if owner == "" || owner == e.UserID {
		return
	}
	if e.Provenance == nil {
		e.Provenance = &Provenance{SourceProtocol: SourceE2A}
	}
	if e.Provenance.Details == nil {
		e.Provenance.Details = map[string]any{}
	}
	e.Provenance.Details[DetailConversationOwner] = owner
}
