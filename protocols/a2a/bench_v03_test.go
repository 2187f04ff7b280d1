package a2a

import "github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"

// benchTask is tasks/get's task of reqs, in v0.3.
func benchTask(taskID, contextID string, reqs []a2amap.Request) any {
	return a2amap.V03Task(a2amap.BuildTask(taskID, contextID, reqs, nil))
}
