package a2av1

import (
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

// Serve is A2A v1.0 as the registry serves it (a host.BindingServer through
// host.BindingsFunc): its [Bindings] over a neutral host, its answers made
// here, by package protocols/a2a's Answers over the host's task frames,
// unless the host is a [Host] with answers of its own. A host's optional
// role [PushHost] is kept.
func Serve(h host.BindingHost) host.Bindings {
	if full, ok := h.(Host); ok {
		return Bindings(full)
	}
	if ph, ok := h.(PushHost); ok {
		return Bindings(answeringPush{answering{h}, ph})
	}
	return Bindings(answering{h})
}

// answering is a host.BindingHost as this package's [Host].
type answering struct{ host.BindingHost }

// answeringPush is an answering host that stores push configs.
type answeringPush struct {
	answering
	PushHost
}

var (
	_ Host     = answering{}
	_ PushHost = answeringPush{}
)

// V1Answers answers the calls from their requests' frames.
func (a answering) V1Answers() Answers { return a2aproto.NewAnswers(a.TaskFrames()) }
