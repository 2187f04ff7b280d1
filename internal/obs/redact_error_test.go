package obs

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestLoggerRedactsCredentialInError: an error whose message holds
// "Bearer <credential>" (an upstream's answer echoing the header, a
// wrapped HTTP error) is redacted as a string attribute is: the "err"
// attribute is an error value, not a string, and went out as it was.
func TestLoggerRedactsCredentialInError(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewLogger(&buf, "json", "debug")
	if err != nil {
		t.Fatal(err)
	}
	cause := fmt.Errorf("upstream call: %w", errors.New(`refused "Authorization: Bearer tok_s3cr3t_0123" for basic Basic dXNlcjpwdw==`))
	log.Warn("upstream call failed", "err", cause)
	out := buf.String()
	for _, s := range []string{"tok_s3cr3t_0123", "dXNlcjpwdw=="} {
		if strings.Contains(out, s) {
			t.Errorf("credential %q logged: %s", s, out)
		}
	}
	if !strings.Contains(out, "upstream call: refused") {
		t.Errorf("the error's text lost: %s", out)
	}
}
