package jsonrpc_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/e2a-pipeline/pipeline/jsonrpc"
)

// A batch decoded and answered element by element: the notification gets
// no response, the streaming method is refused inside the batch.
func ExampleBatch() {
	body := []byte(`[{"jsonrpc":"2.0","id":1,"method":"add","params":[1,2]},
		{"jsonrpc":"2.0","method":"log","params":{}},
		{"jsonrpc":"2.0","id":2,"method":"message/stream","params":{}}]`)
	calls, batch, err := jsonrpc.Decode(body, jsonrpc.DecodeOptions{})
	if err != nil {
		panic(err)
	}
	streaming := func(m string) bool { return m == "message/stream" }
	resps := jsonrpc.Batch(context.Background(), calls, streaming, func(_ context.Context, req *jsonrpc.Request) (any, *jsonrpc.Error) {
		var xs []int
		if json.Unmarshal(req.Params, &xs) != nil {
			return nil, jsonrpc.InvalidParams("want numbers")
		}
		return xs[0] + xs[1], nil
	})
	out, _ := json.Marshal(resps)
	fmt.Println(batch, string(out))
	// Output: true [{"jsonrpc":"2.0","id":1,"result":3},{"jsonrpc":"2.0","id":2,"error":{"code":-32600,"message":"Invalid Request: streaming method \"message/stream\" cannot be part of a batch; send it alone"}}]
}
