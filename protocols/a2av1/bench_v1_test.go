package a2av1

import (
	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
)

// v1SendResult is SendMessage's result from frames fs, as the handler
// answers it (A2AResult, EventFilter).
func v1SendResult(requestID string, p a2amap.Params, fs []*e2a.Response) (a2a.SendMessageResult, error) {
	agg := a2amap.NewAggregator(requestID, p)
	for _, f := range fs {
		if err := agg.Add(f); err != nil {
			return nil, err
		}
	}
	kept, _ := a2aproto.EventFilter(p)(agg.Result(nil))
	return kept.(a2a.SendMessageResult), nil
}

// v1BuildTask is GetTask's task of reqs, as the handler answers it.
func v1BuildTask(taskID, contextID string, reqs []a2amap.Request) (*a2a.Task, error) {
	return a2amap.BuildTask(taskID, contextID, reqs, nil), nil
}
