package normalizer

import (
	"strings"
	"testing"
)

func TestValidTraceparent(t *testing.T) {
	for s, want := range map[string]bool{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01":        true,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00":        true,
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future": true,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x":      false, // version 00 has exactly 4 fields
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01":        false,
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01":        false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01":        false,
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01":        false, // upper case
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7":           false,
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01":        false,
		"":          false,
		"not-valid": false,
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x": false,
	} {
		if got := validTraceparent(s); got != want {
			t.Errorf("validTraceparent(%q) = %v", s, got)
		}
	}
}

func TestCleanTracestate(t *testing.T) {
	if got := cleanTracestate([]string{"a=1", "", "b=2"}); got != "a=1,b=2" {
		t.Errorf("join: %q", got)
	}
	if got := cleanTracestate([]string{strings.Repeat("a", 513)}); got != "" {
		t.Error("over 512 characters kept")
	}
	if got := cleanTracestate([]string{"a=\x01"}); got != "" {
		t.Error("control character kept")
	}
}

func TestCleanURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:pw@host/hook?x=1":             "https://host/hook?x=1",
		"https://host/hook?token=abc&x=1":           "https://host/hook?token=%5Bredacted%5D&x=1",
		"https://host/hook?api_key=abc":             "https://host/hook?api_key=%5Bredacted%5D",
		"https://host/hook":                         "https://host/hook",
		"http://[::1]:namedport":                    "",
		"https://host/p?X-Amz-Signature=s&sig=zzzz": "https://host/p?X-Amz-Signature=%5Bredacted%5D&sig=%5Bredacted%5D",
	} {
		if got := cleanURL(in); got != want {
			t.Errorf("cleanURL(%q) = %q, want %q", in, got, want)
		}
	}
}
