package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/egress/console"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/render"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// awaitRecords returns once the console's index stream holds n request
// records (q.* subjects): the indexer writes them asynchronously, a few
// milliseconds after each request is stored.
func awaitRecords(ctx context.Context, js jetstream.JetStream, cfg streams.Config, n int) error {
	c, err := js.OrderedConsumer(ctx, console.IndexStreamConfig(cfg, 0).Name, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subjects.KV(console.Bucket, "q.>")},
	})
	if err != nil {
		return err
	}
	for range n {
		if _, err := c.Next(jetstream.FetchContext(ctx)); err != nil {
			return err
		}
	}
	return nil
}

// The console lists recent requests from its index, which the indexer of
// every egress process keeps up to date, with each request's status read
// from its frames. Here two users' requests are answered by an agent pool
// "echo"; the console lists them newest first, then one user's only, and
// serves one request's detail over HTTP (Register): its index entry, its
// envelope with the secrets removed, and the command that replays it.
func Example() {
	// An embedded JetStream server with the pipeline's streams.
	mem, err := streams.StartInMemory(context.Background())
	if err != nil {
		panic(err)
	}
	defer mem.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The agent pool: one text chunk per word of params.text.
	echo := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		for _, word := range strings.Fields(env.ParamString("text")) {
			if err := w.Chunk(e2a.DeltaText, word); err != nil {
				return err
			}
		}
		return w.Complete(nil)
	})
	runCtx, stopAgent := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- agent.Run(runCtx, mem.Conn, "echo", echo, agent.WithCoalesce(0, 0)) }()

	// Egress serves the frames; the console runs its indexer beside it.
	eg, err := egress.New(mem.Conn)
	if err != nil {
		panic(err)
	}
	defer eg.Close()
	con, err := console.New(ctx, mem.Conn, eg, console.WithStreamsConfig(mem.Config))
	if err != nil {
		panic(err)
	}
	defer con.Close()

	// Two requests, each read to its final frame.
	pub := ingress.NewPublisher(mem.JetStream, 10*time.Second)
	for _, env := range []*e2a.Envelope{
		{RequestID: "req-alice-1", UserID: "alice", TaskID: "task-a", IsStream: true,
			Params: map[string]any{"text": "hello from alice", "api_key": "sk-live-0123456789"}},
		{RequestID: "req-bob-1", UserID: "bob", IsStream: true, Params: map[string]any{"text": "hi"}},
	} {
		if _, err := pub.Publish(ctx, "echo", env); err != nil {
			panic(err)
		}
		if err := egress.Replay(ctx, mem.Conn, env.RequestID, 0, func(render.Frame) error { return nil }); err != nil {
			panic(err)
		}
	}
	if err := awaitRecords(ctx, mem.JetStream, mem.Config, 2); err != nil {
		panic(err)
	}

	for _, q := range []console.Query{{}, {User: "alice"}} {
		page, err := con.List(ctx, q)
		if err != nil {
			panic(err)
		}
		fmt.Printf("list user=%q:\n", q.User)
		for _, e := range page.Entries {
			fmt.Printf("  %s pool=%s user=%s task=%q %s, %d frames\n", e.RequestID, e.Pool, e.Principal, e.TaskID, e.Status, e.Frames)
		}
	}

	// The same over HTTP, as the page reads it.
	mux := http.NewServeMux()
	con.Register(mux)
	web := httptest.NewServer(mux)
	defer web.Close()
	resp, err := http.Get(web.URL + "/console/api/requests/req-alice-1")
	if err != nil {
		panic(err)
	}
	var d console.RequestDetail
	_ = json.NewDecoder(resp.Body).Decode(&d)
	resp.Body.Close()
	if d.Entry != nil {
		fmt.Println("detail:", resp.StatusCode, d.Entry.Status, d.Envelope["user_id"])
	}
	fmt.Println("params:", d.Envelope["params"])
	fmt.Println("replay:", d.ReplayCommand)

	stopAgent()
	fmt.Println("agent:", <-done)
	// Output:
	// list user="":
	//   req-bob-1 pool=echo user=bob task="" succeeded, 2 frames
	//   req-alice-1 pool=echo user=alice task="task-a" succeeded, 4 frames
	// list user="alice":
	//   req-alice-1 pool=echo user=alice task="task-a" succeeded, 4 frames
	// detail: 200 succeeded alice
	// params: map[api_key:[redacted] text:hello from alice]
	// replay: e2a replay --request req-alice-1
	// agent: <nil>
}

// RedactEnvelope is how the console shows a stored envelope: the auth
// object is dropped whole, an inline push config's webhook URL keeps only
// its scheme and host, and the value of every key naming a secret is
// replaced, at any depth; references and counts such as credential_ref
// and max_tokens are not secrets.
func ExampleRedactEnvelope() {
	stored := []byte(`{
		"request_id": "req-1",
		"auth": {"type": "bearer", "credential_ref": "cred-1"},
		"params": {
			"query": "hello",
			"max_tokens": 256,
			"api_key": "sk-live-0123456789",
			"options": {"password": "hunter2", "credential_ref": "vault:db"},
			"push_notification_config": {"url": "https://hooks.example.com/a2a/secret-path?sig=abc", "token": "tok-123"}
		}
	}`)
	m := console.RedactEnvelope(stored)
	b, _ := json.MarshalIndent(m, "", "  ")
	fmt.Println(string(b))
	fmt.Println(console.RedactEnvelope([]byte(`["not", "an", "object"]`)) == nil)
	// Output:
	// {
	//   "params": {
	//     "api_key": "[redacted]",
	//     "max_tokens": 256,
	//     "options": {
	//       "credential_ref": "vault:db",
	//       "password": "[redacted]"
	//     },
	//     "push_notification_config": {
	//       "token": "[redacted]",
	//       "url": "https://hooks.example.com/…"
	//     },
	//     "query": "hello"
	//   },
	//   "request_id": "req-1"
	// }
	// true
}
