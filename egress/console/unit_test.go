package console

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestReplayCommand(t *testing.T) {
	for id, want := range map[string]string{
		"req-42":         "e2a replay --request req-42",
		"a b":            "e2a replay --request 'a b'",
		"it's $(rm -rf)": `e2a replay --request 'it'\''s $(rm -rf)'`,
		"":               "e2a replay --request ''",
		"x;y":            "e2a replay --request 'x;y'",
	} {
		if got := ReplayCommand(id); got != want {
			t.Errorf("ReplayCommand(%q) = %q, want %q", id, got, want)
		}
	}
}

func TestRedactEnvelope(t *testing.T) {
	in := `{"request_id":"r1","auth":{"bearer_token":"tok-secret","api_key_ref":"vault:k"},
	  "params":{"text":"hi","api_key":"sk-1","usage":{"input_tokens":3},"list":[{"password":"p"}],"credential_ref":"ref:1"},
	  "channel_context":{"Authorization":"Bearer x","cookie":"c=1"},"n":12345678901234567890}`
	m := RedactEnvelope([]byte(in))
	b, _ := json.Marshal(m)
	s := string(b)
	for _, bad := range []string{"tok-secret", "sk-1", `"p"`, "Bearer x", "c=1", `"auth"`} {
		if strings.Contains(s, bad) {
			t.Errorf("%s still in %s", bad, s)
		}
	}
	for _, good := range []string{`"input_tokens":3`, `"credential_ref":"ref:1"`, `"text":"hi"`, "12345678901234567890"} {
		if !strings.Contains(s, good) {
			t.Errorf("%s missing from %s", good, s)
		}
	}
	if RedactEnvelope([]byte(`[1]`)) != nil || RedactEnvelope([]byte(`nope`)) != nil {
		t.Error("non-object accepted")
	}
}

func TestQueryFromURL(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	q, err := QueryFromURL(url.Values{"task": {"t"}, "since": {"15m"}, "until": {"2026-01-01T11:59:00Z"}, "before": {"42"}, "limit": {"9"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if q.TaskID != "t" || !q.Since.Equal(now.Add(-15*time.Minute)) || q.Until.Minute() != 59 || q.Before != 42 || q.Limit != 9 {
		t.Fatalf("%+v", q)
	}
	if key, want := q.keyFilter(); key != pointerKey(fieldTask, "t") || want != "t" || !strings.HasPrefix(key, "x.task.") || len(key) != len("x.task.")+bucketDigits {
		t.Fatalf("key filter %s %s", key, want)
	}
	if key, want := (&Query{User: "u"}).keyFilter(); key != recordKey("u") || want != "" {
		t.Fatalf("user filter %s %s", key, want)
	}
	if err := (&Query{Since: now, Until: now.Add(-time.Second)}).validate(); err == nil {
		t.Fatal("until before since accepted")
	}
	lq := Query{Limit: 10000}
	if err := lq.validate(); err != nil || lq.Limit != MaxPageSize {
		t.Fatalf("limit %d, %v", lq.Limit, err)
	}
	// A negative duration ago is a time ahead: refused, as e2a tail
	// --since refuses it (the most negative one wrapped to the past).
	for _, d := range []string{"-5m", "-2562047h47m16.854775808s"} {
		for _, name := range []string{"since", "until"} {
			if q, err := QueryFromURL(url.Values{name: {d}}, now); !errors.Is(err, ErrBadQuery) {
				t.Errorf("%s=%s read as %+v, %v", name, d, q, err)
			}
		}
	}
}
