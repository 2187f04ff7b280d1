package normalizer_test

import (
	"net/http"
	"testing"

	"github.com/e2a-pipeline/pipeline/normalizer"
)

// TestCallerUserID: for a message that claims no user in its body,
// CallerUserID is the user_id the A2A adapter gives the envelope, for each
// kind of caller (authenticated, a gateway asserting X-User-ID, a gateway
// without it, X-User-ID alone, nobody).
func TestCallerUserID(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m1","parts":[{"kind":"text","text":"hi"}]}}}`)
	hdr := func(u string) http.Header {
		h := http.Header{}
		if u != "" {
			h.Set("X-User-ID", u)
		}
		return h
	}
	for _, c := range []struct {
		name string
		in   normalizer.Input
		want string
	}{
		{"principal wins over the header", normalizer.Input{Principal: &normalizer.Principal{UserID: "alice"}, Header: hdr("mallory")}, "alice"},
		{"gateway asserting a user", normalizer.Input{Principal: &normalizer.Principal{UserID: "gw", AssertsUser: true}, Header: hdr("carol")}, "carol"},
		{"gateway without X-User-ID", normalizer.Input{Principal: &normalizer.Principal{UserID: "gw", AssertsUser: true}, Header: hdr("")}, "gw"},
		{"header alone", normalizer.Input{Header: hdr("dave")}, "dave"},
		{"nobody", normalizer.Input{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.in.Body = body
			res, err := normalizer.New(normalizer.Config{}).FromA2A(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := normalizer.CallerUserID(c.in); got != c.want || res.Envelope.UserID != c.want {
				t.Fatalf("CallerUserID %q, envelope user_id %q, want %q", got, res.Envelope.UserID, c.want)
			}
		})
	}
}
