package subjects_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/e2a-pipeline/pipeline/subjects"
)

func ExampleEncodeID() {
	for _, id := range []string{"req-42", "a.b", "", "日本"} {
		tok, _ := subjects.EncodeID(id)
		fmt.Printf("%q -> %s\n", id, tok)
	}
	_, err := subjects.EncodeID(strings.Repeat("x", 10_000))
	fmt.Println(errors.Is(err, subjects.ErrIDTooLong))
	// Output:
	// "req-42" -> req-42
	// "a.b" -> =YS5i
	// "" -> =
	// "日本" -> =5pel5pys
	// true
}

func ExampleDecodeID() {
	id, _ := subjects.DecodeID("=YS5i")
	fmt.Println(id)
	_, err := subjects.DecodeID("=YWJj") // the plain id "abc" is never encoded
	fmt.Println(errors.Is(err, subjects.ErrInvalidToken))
	// Output:
	// a.b
	// true
}

func ExampleRequest() {
	s, _ := subjects.Request("summarizer", "req-42")
	fmt.Println(s)
	f, _ := subjects.RequestFilter("summarizer")
	fmt.Println(f)
	_, err := subjects.Request("bad.pool", "req-42")
	fmt.Println(errors.Is(err, subjects.ErrInvalidPool))
	// Output:
	// e2a.req.summarizer.req-42
	// e2a.req.summarizer.>
	// true
}

func ExampleResponse() {
	resp, _ := subjects.Response("task 7/1")
	live, _ := subjects.Live("task 7/1")
	ctl, _ := subjects.Control("task 7/1")
	fmt.Println(resp)
	fmt.Println(live)
	fmt.Println(ctl)
	// Output:
	// e2a.resp.=dGFzayA3LzE
	// e2a.live.=dGFzayA3LzE
	// e2a.ctl.=dGFzayA3LzE
}

func ExampleParseRequest() {
	agent, id, err := subjects.ParseRequest("e2a.req.summarizer.=YS5i")
	fmt.Println(agent, id, err)
	_, _, err = subjects.ParseRequest("e2a.resp.req-42")
	fmt.Println(errors.Is(err, subjects.ErrNotE2ASubject))
	// Output:
	// summarizer a.b <nil>
	// true
}

func ExampleParse() {
	s, _ := subjects.Parse("e2a.live.req-42")
	fmt.Println(s.Kind, s.RequestID)
	// Output: live req-42
}

func ExampleFrameMsgID() {
	fmt.Println(subjects.FrameMsgID("req-42", 3))
	id, seq, _ := subjects.ParseFrameMsgID("req:42:3")
	fmt.Println(id, seq)
	// Output:
	// req-42:3
	// req:42 3
}

func ExampleAuditPartition() {
	p, _ := subjects.AuditPartition("req-42", 16)
	fmt.Println(subjects.AuditRequest(p), subjects.AuditResponse(p))
	src, dest := subjects.AuditResponseMapping(16)
	fmt.Println(src, "->", dest)
	// Output:
	// e2a.audit.req.8 e2a.audit.resp.8
	// e2a.resp.* -> e2a.audit.resp.{{partition(16,1)}}
}
