package a2a

import (
	"net/http"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// ExtendedCards is the optional role of a [host.TaskHost] that serves
// agent/getAuthenticatedExtendedCard (the card declares
// supportsAuthenticatedExtendedCard); without it the method answers
// -32007, AuthenticatedExtendedCardNotConfigured.
type ExtendedCards interface {
	// AuthenticatedExtendedCard is the extended card for the caller c of
	// the call in (the agent pool it names, its base URL), or the
	// refusal to answer.
	AuthenticatedExtendedCard(in host.Call, c host.RPCCaller) (map[string]any, *host.Refusal)
}

// serveDirect answers the A2A v0.3 methods that are not normalized into
// an envelope (the push-config methods, the extended card) and reports
// whether req was one.
func (d *frontDoor) serveDirect(rep host.Reply, in host.Call, tc host.TaskCaller, nin normalizer.Input, req *jsonrpc.Request) bool {
	switch {
	case isPushMethod(req.Method):
		d.servePush(rep, in, tc, nin, req)
	case req.Method == normalizer.A2AGetAuthenticatedExtendedCard:
		d.serveExtendedCard(rep, in, tc)
	default:
		return false
	}
	return true
}

// serveExtendedCard answers agent/getAuthenticatedExtendedCard from the
// host's ExtendedCards, before anything is normalized or published.
func (d *frontDoor) serveExtendedCard(rep host.Reply, in host.Call, c host.RPCCaller) {
	ec, ok := d.h.(ExtendedCards)
	if !ok {
		rep.Refuse(host.Refusal{Status: http.StatusOK, RPCCode: jsonrpc.CodeA2AExtendedCardNotConfigured,
			Message: "no authenticated extended card is configured"})
		return
	}
	card, f := ec.AuthenticatedExtendedCard(in, c)
	if f != nil {
		rep.Refuse(*f)
		return
	}
	rep.Result(card)
}
