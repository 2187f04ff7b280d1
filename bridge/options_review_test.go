package bridge

import (
	"errors"
	"testing"
)

// TestCredentialsRefuseInvalidHeaderValues: WithCredentials checks header
// names but not values: an API key read with its trailing newline, or a
// header value holding CR/LF, is accepted and then every upstream call
// fails in the transport ("invalid header field value"), instead of
// NewClient refusing it with ErrInvalidOption.
func TestCredentialsRefuseInvalidHeaderValues(t *testing.T) {
	cases := []struct {
		name string
		cr   Credentials
	}{
		{"api key with newline", Credentials{APIKey: "sk-secret\n"}},
		{"header value with CRLF", Credentials{Headers: map[string]string{"X-Api-Key": "a\r\nX-Injected: 1"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewClient("http://127.0.0.1:9/v1", WithCredentials(tc.cr))
			if !errors.Is(err, ErrInvalidOption) {
				t.Errorf("NewClient(WithCredentials(%s)) = %v, want an error wrapping ErrInvalidOption", tc.name, err)
			}
		})
	}
}
