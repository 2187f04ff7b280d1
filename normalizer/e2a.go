package normalizer

import (
	"bytes"
	"errors"
	"strings"

	"github.com/e2a-pipeline/pipeline/e2a"
)

// legacyKeys are the top-level keys of a legacy AgentRequest (spec §9–§10).
var legacyKeys = [][]byte{[]byte(`"channel_id"`), []byte(`"req_method"`), []byte(`"metadata"`), []byte(`"payload"`), []byte(`"binding"`)}

// FromE2A normalizes a raw E2A envelope or a legacy AgentRequest (spec
// §9–§11) with every compatibility rule of e2a.FromJSON. The envelope is
// kept as sent (a top-level field §4 does not define is dropped, not
// refused, as from_dict reads the fields it knows), with these
// completions: protocol_version "1.0",
// request_id (Input.RequestID or a new one), timestamp (now), channel
// (Input.Channel, else "e2a"), provenance (source_protocol "e2a", or
// "agent_request" for a legacy body without provenance; converter and
// converted_at set when the sender set none), trace context from the
// headers, identity per [Principal], secrets stripped, and the pool by the
// routing rule. A timestamp, deadline or provenance.converted_at is kept in
// the RFC 3339 UTC form every stage reads: a lower-case "t" or "z" is
// written upper case, another offset converted.
//
// Errors: ErrParse for a body that is not JSON (or nests too deep),
// ErrInvalidRequest for JSON that is not an envelope (not an object, a
// known field with the wrong type, a timestamp or deadline that is neither
// RFC 3339 nor epoch seconds, a provenance.converted_at that is not RFC
// 3339, an identity_origin outside §4.3's four, a protocol_version of
// another major version than 1).
func (n *Normalizer) FromE2A(in Input) (*Result, error) {
	r := n.begin(in, e2a.SourceE2A, ProtocolE2A)
	if e := checkUTF8(in.Body, ProtocolE2A); e != nil {
		return nil, e
	}
	env, err := e2a.FromJSON(in.Body)
	if err != nil {
		kind := ErrInvalidRequest
		if errors.Is(err, e2a.ErrInvalidJSON) {
			kind = ErrParse
			if t := bytes.TrimSpace(in.Body); len(t) > 0 && t[0] != '{' && e2a.CheckDepth(t, e2a.MaxNesting) == nil && jsonValid(t) {
				kind = ErrInvalidRequest // valid JSON, but not an object
			}
		}
		e := newErr(kind, ProtocolE2A, "%s", detail(err))
		return nil, e
	}
	for name, ts := range map[string]*string{"timestamp": &env.Timestamp, "deadline": &env.Deadline} {
		if !canonicalTime(ts) {
			return nil, newErr(ErrInvalidRequest, ProtocolE2A, "%s must be RFC 3339 or epoch seconds", name)
		}
	}
	if v := env.ProtocolVersion; v != "" && !spokenVersion(v) {
		// The frames echo the request's version (§12.4): another major
		// version was answered in frames claiming it, read as 1.0.
		return nil, newErr(ErrInvalidRequest, ProtocolE2A, "protocol_version must be 1.x: the pipeline speaks E2A %s", e2a.ProtocolVersion)
	}
	// The conversion time a client's converter gives (§4.2) is a time as
	// timestamp is: it was stored as sent ("garbage", another offset).
	if p := env.Provenance; p != nil && !canonicalTime(&p.ConvertedAt) {
		return nil, newErr(ErrInvalidRequest, ProtocolE2A, "provenance.converted_at must be RFC 3339")
	}
	switch env.IdentityOrigin {
	case "", e2a.IdentitySystem, e2a.IdentityUser, e2a.IdentityAgent, e2a.IdentityService:
	default:
		// §4.3: system / user / agent / service; another value reached
		// the agent as sent (with auth off, or a gateway asserting users).
		return nil, newErr(ErrInvalidRequest, ProtocolE2A, "identity_origin must be one of system, user, agent, service")
	}
	if legacy, own := isLegacy(in.Body); legacy && (env.Provenance == nil || !own) {
		// A legacy body's provenance, when it sent none: a legacy binding
		// made one (details.migrated_from_binding), whose body was not
		// marked agent_request.
		if env.Provenance == nil {
			env.Provenance = &e2a.Provenance{}
		}
		env.Provenance.SourceProtocol = e2a.SourceLegacy
	}
	return r.finish(env, OpSubmit, false)
}

// canonicalTime reports whether *ts is empty or an RFC 3339 time (spec
// §4.3), which it leaves in the form every stage reads (e2a.ParseTime): a
// "t" or "z" written in lower case, which RFC 3339 §5.6 allows and Go's
// parser refuses, is made upper case, then converted to UTC as
// e2a.FromJSON converts any other offset. A lower-case time was refused
// 400, and a deadline stored so would not be read by the agent.
func canonicalTime(ts *string) bool {
	if *ts == "" {
		return true
	}
	if _, err := e2a.ParseTime(*ts); err == nil {
		return true
	}
	// An RFC 3339 time holds no letter but T and Z: upper-casing changes
	// nothing else of one, and what is not one stays refused.
	up := strings.ToUpper(*ts)
	if _, err := e2a.ParseTime(up); err != nil {
		return false
	}
	*ts = e2a.NormalizeTime(up)
	return true
}

// spokenVersion reports whether v is a protocol_version of the major
// version the pipeline speaks: 1, or 1 and minor (and patch) numbers
// ("1.0", "1.2"); a later minor version adds what a 1.0 reader drops.
func spokenVersion(v string) bool {
	major, rest, dotted := strings.Cut(v, ".")
	if major != "1" {
		return false
	}
	for dotted {
		var n string
		n, rest, dotted = strings.Cut(rest, ".")
		if n == "" || strings.Trim(n, "0123456789") != "" {
			return false
		}
	}
	return true
}

// isLegacy reports whether body has a legacy AgentRequest key at its top
// level, and then whether it has a provenance member of its own. A cheap
// byte search rules most bodies out before any decoding.
func isLegacy(body []byte) (legacy, provenance bool) {
	found := false
	for _, k := range legacyKeys {
		if bytes.Contains(body, k) {
			found = true
			break
		}
	}
	if !found {
		return false, false
	}
	keys, err := topLevelKeys(body)
	if err != nil {
		return false, false
	}
	for _, k := range []string{"channel_id", "req_method", "metadata", "payload", "binding"} {
		if keys[k] {
			return true, keys["provenance"]
		}
	}
	return false, false
}
