package streams_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/e2a-pipeline/pipeline/streams"
)

// TestRedactURLs: credentials in NATS URLs are never printed (found by a
// review: e2a dev printed and logged E2A_NATS_URL as given).
func TestRedactURLs(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":                            "nats://127.0.0.1:4222",
		"nats://u:s3cret@h:4222":                           "nats://u:xxxxx@h:4222",
		"nats://t0ken@h:4222":                              "nats://xxxxx@h:4222",
		"nats://a:p1@h1:4222,nats://h2:4222,tls://b:p2@h3": "nats://a:xxxxx@h1:4222,nats://h2:4222,tls://b:xxxxx@h3",
	} {
		if got := streams.RedactURLs(in); got != want {
			t.Errorf("RedactURLs(%q) = %q, want %q", in, got, want)
		}
	}
	c := streams.ConnConfig{NatsURL: "nats://u:s3cret@h:4222"}
	if strings.Contains(c.String(), "s3cret") || strings.Contains(fmt.Sprint(c.LogValue()), "s3cret") {
		t.Errorf("a URL's password shown: %s", c)
	}
}
