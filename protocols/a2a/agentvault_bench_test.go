package a2a_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/ingress"
	"github.com/e2a-pipeline/pipeline/internal/pipetest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

func avBenchPost(tb testing.TB, url, params string) []byte {
	tb.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":"req-1","method":"tasks/sendSubscribe","params":%s}`, params)
	_, b := testkit.Do(tb, http.MethodPost, url+"/a2a?agent=av", body, "Content-Type", "application/json",
		"X-Api-Key", "alice-key-0123456789", "Accept", "text/event-stream")
	return b
}

var avTaskIDRe = regexp.MustCompile(`"taskId":("[^"]+")`)

// BenchmarkAgentVaultLongAnswer: tasks/sendSubscribe of a finished task
// whose answer is n text chunks (a frame each, 6 bytes), read whole: the
// held message's text is built once (a strings.Builder), so B/op grows
// with n, not with its square (compare n=2000 and n=10000).
func BenchmarkAgentVaultLongAnswer(b *testing.B) {
	for _, n := range []int{2000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			auth := pipetest.KeyAuth(b, map[string]string{"alice": "alice-key-0123456789"}, nil)
			p := pipetest.Start(b, pipetest.WithIngress(ingress.WithAuth(auth)))
			p.Pool("av", agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
				for i := range n {
					if err := w.Chunk(e2a.DeltaText, strconv.Itoa(10000 + i)[1:]+" "); err != nil {
						return err
					}
					if err := w.Sync(); err != nil {
						return err
					}
				}
				return w.Complete("done")
			}))
			first := avBenchPost(b, p.URL, `{"message":`+avText("long")+`}`)
			m := avTaskIDRe.FindSubmatch(first)
			if m == nil {
				b.Fatalf("no task id: %.300s", first)
			}
			var id string
			if err := json.Unmarshal(m[1], &id); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if body := avBenchPost(b, p.URL, `{"id":"`+id+`"}`); !strings.Contains(string(body), "COMPLETED") {
					b.Fatalf("no end: %.300s", body)
				}
			}
		})
	}
}
