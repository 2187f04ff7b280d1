package ingress_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/workflow"
)

// TestDeclaredLengthOverBoundRefusedUnread: a request whose
// Content-Length passes the body bound (E2A_MAX_BODY_BYTES) is answered
// the door's 413 at once, none of its body read: with `Expect:
// 100-continue` (curl's, for a body over 1 MiB; .NET's and Java's clients)
// every door answered `100 Continue`, inviting the whole upload, and read
// the bound's worth before refusing it (RFC 9110 §10.1.1: a server that
// refuses on the headers answers before the content is sent).
func TestDeclaredLengthOverBoundRefusedUnread(t *testing.T) {
	_, nc := natstest.RunServer(t)
	base := frontDoor(t, nc, ingress.WithMaxBodyBytes(1024), ingress.WithWorkflow(workflow.New(workflow.Options{})))
	host := strings.TrimPrefix(base, "http://")
	for _, c := range []struct{ path, ctype, want string }{
		{"/v1/requests", "application/json", `"body_too_large"`},
		{"/pools/demo/v1/requests", "application/json", `"body_too_large"`},
		{"/a2a", "application/json", `"code":-32600`},
		{"/a2a/v1", "application/json", `"code":-32600`},
		{"/a2a/v1/message:send", "application/json", `"code":413`},
		{"/a2a/v1/tasks/t1/pushNotificationConfigs", "application/json", `"code":413`},
		{"/acp", "application/json", `"code":-32600`},
		{"/a2e", "application/x-ndjson", `"body_too_large"`},
		{"/api/v1/workflows/execute", "application/json", `"ValidationError"`},
	} {
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		// A deadline so that a server waiting for the content fails the
		// case instead of hanging the test.
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
			c.path, host, c.ctype, 64<<20)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Errorf("POST %s: %v", c.path, err)
			conn.Close()
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		conn.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), c.want) {
			t.Errorf("POST %s, Content-Length 64 MiB over a 1 KiB bound: %d %.300s, want 413 %s before the body", c.path, resp.StatusCode, b, c.want)
		}
	}
}
