package a2a

import (
	"encoding/json"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
	"github.com/e2a-pipeline/pipeline/render"
)

var (
	_ render.Renderer      = (*send)(nil)
	_ render.Interruptible = (*send)(nil)
)

// send renders message/send: one JSON-RPC response whose result is a
// Message (the agent answered with one message) or a Task (several: the
// messages in history, a completed turn's text in artifacts). While
// it waits it writes blank lines, which JSON decoders skip.
type send struct {
	o   *render.Output
	p   a2amap.Params
	agg *a2amap.Aggregator
}

// NewSend returns the A2A v0.3 message/send renderer (format
// [SendFormat]) of requestID: the frames aggregated by a2amap.Aggregator,
// then one JSON-RPC response (a Message or a Task without the parts the
// client must not get, in v0.3: a2amap.V03Result; or the error, [Error]).
func NewSend(o *render.Output, requestID string, p a2amap.Params) render.Renderer {
	return &send{o: o, p: p, agg: a2amap.NewAggregator(requestID, p)}
}

func (r *send) Start() error {
	r.o.Header().Set("Content-Type", "application/json")
	r.o.Header().Set("Cache-Control", "no-cache")
	return nil
}

func (r *send) Frame(f *render.Frame) error {
	resp, err := f.Decoded()
	if err != nil {
		return err
	}
	return r.agg.Add(resp)
}

func (r *send) Heartbeat() error {
	_, err := r.o.WriteString("\n")
	return err
}

func (r *send) End(err error) error {
	if err != nil {
		return r.writeRPC(jsonrpc.ErrorResponse(r.p.JSONRPCID, Error(err)))
	}
	keep := EventFilter(r.p)
	res, ok := keep(r.agg.Result(r.p.HistoryLength))
	if !ok {
		// A reply of dropped parts only: the task, whose artifacts are
		// then empty.
		res, _ = keep(r.agg.Task(r.p.HistoryLength))
	}
	return r.writeResult(res)
}

// Interrupted answers a send the server's shutdown cut before its final
// frame: the Task as its frames so far make it (submitted or working),
// which the client follows with tasks/get or tasks/resubscribe, as it
// does a non-blocking send's answer.
func (r *send) Interrupted() error {
	res, _ := EventFilter(r.p)(r.agg.Task(r.p.HistoryLength))
	return r.writeResult(res)
}

// writeResult writes res, a filtered v1.0 result, as the v0.3 answer (or
// the error of its conversion).
func (r *send) writeResult(res a2a.Event) error {
	old, err := a2amap.V03Result(res.(a2a.SendMessageResult))
	if err != nil {
		return r.writeRPC(jsonrpc.ErrorResponse(r.p.JSONRPCID, Error(err)))
	}
	return r.writeRPC(jsonrpc.ResultResponse(r.p.JSONRPCID, old))
}

func (r *send) writeRPC(v jsonrpc.Response) error {
	r.o.Header().Set("Content-Type", "application/json")
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = r.o.Write(append(b, '\n'))
	return err
}
