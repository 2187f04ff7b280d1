package archive_test

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/subjects"
)

// An archiver runs beside the pipeline; a Reader finds what it stored by
// E2A_AUDIT sequence.
func ExampleRun() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	mem, err := streams.StartInMemory(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mem.Close()
	// A request as ingress stores it; E2A_AUDIT copies it.
	m := nats.NewMsg("e2a.req.demo.req-1")
	m.Header.Set(subjects.HeaderRequestID, "req-1")
	m.Data = []byte(`{"request_id":"req-1","method":"chat","params":{"text":"hello"}}`)
	if _, err := mem.JetStream.PublishMsg(ctx, m); err != nil {
		fmt.Println(err)
		return
	}

	actx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- archive.Run(actx, mem.Conn, archive.WithFlushInterval(50*time.Millisecond)) }()

	r, _ := archive.NewReader(mem.Conn)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for sp, _ := r.Span(ctx); sp.Empty || !sp.Exists; sp, _ = r.Span(ctx) {
		select {
		case <-ctx.Done():
			fmt.Println("not archived")
			return
		case <-tick.C:
		}
	}
	stop()
	fmt.Println("archiver:", <-done)
	sp, _ := r.Span(ctx)
	for rec, err := range r.Records(ctx, sp, 1) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(rec.Seq, rec.Subject, rec.Header.Get(subjects.HeaderRequestID), string(rec.Data))
	}
	// Output:
	// archiver: <nil>
	// 1 e2a.audit.req.1 req-1 {"request_id":"req-1","method":"chat","params":{"text":"hello"}}
}
