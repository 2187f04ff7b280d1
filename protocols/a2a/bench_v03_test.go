package a2a

import "github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"

// v03Task is tasks/get's task of reqs.
func v03Task(taskID, contextID string, reqs []a2amap.Request) any {
	return a2amap.BuildTask(taskID, contextID, reqs, nil)
}
