package subjects_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/e2a-pipeline/pipeline/subjects"
)

// hostileIDs are request ids that must survive the subject round trip.
var hostileIDs = map[string]string{
	"plain":             "req-123_ABC",
	"uuid":              "0b9d8f8e-3c1a-4b8e-9f3e-1d2c3b4a5f60",
	"plain max":         strings.Repeat("a", 64),
	"plain max+1":       strings.Repeat("a", 65),
	"empty":             "",
	"dot":               ".",
	"dots":              "a.b.c",
	"leading dot":       ".a",
	"trailing dot":      "a.",
	"star":              "*",
	"gt":                ">",
	"star token":        "a.*.b",
	"gt token":          "a.>",
	"space":             " ",
	"spaces":            "a b c",
	"tab":               "\t",
	"tab inside":        "a\tb",
	"newline":           "a\r\nb",
	"nul":               "a\x00b",
	"unicode":           "réquest-日本語-🚀",
	"invalid utf8":      "\xff\xfe\xfd",
	"marker":            "=",
	"marker prefix":     "=abc",
	"marker lookalike":  "=YWJj", // "=" + base64("abc"): must not decode to "abc"
	"base64 padding":    "YWJj==",
	"tilde":             "~abc",
	"dollar":            "$JS.API",
	"colon":             "a:1",
	"slash":             "a/b",
	"percent":           "%2E",
	"10 kB (too long)":  strings.Repeat("x", 10*1024),
	"max length":        strings.Repeat(".", subjects.MaxIDLength),
	"max length + 1":    strings.Repeat(".", subjects.MaxIDLength+1),
	"max length plain":  strings.Repeat("z", subjects.MaxIDLength),
	"max length+1 byte": strings.Repeat("z", subjects.MaxIDLength+1),
}

func TestEncodeDecodeHostile(t *testing.T) {
	for name, id := range hostileIDs {
		t.Run(name, func(t *testing.T) {
			tok, err := subjects.EncodeID(id)
			if len(id) > subjects.MaxIDLength {
				if !errors.Is(err, subjects.ErrIDTooLong) {
					t.Fatalf("EncodeID(%d bytes) err = %v, want ErrIDTooLong", len(id), err)
				}
				for _, f := range []func(string) (string, error){subjects.Response, subjects.Live, subjects.Control} {
					if _, err := f(id); !errors.Is(err, subjects.ErrIDTooLong) {
						t.Fatalf("builder err = %v, want ErrIDTooLong", err)
					}
				}
				if _, err := subjects.Request("pool", id); !errors.Is(err, subjects.ErrIDTooLong) {
					t.Fatalf("Request err = %v, want ErrIDTooLong", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("EncodeID: %v", err)
			}
			if subjects.IsPlainID(id) != (tok == id) {
				t.Fatalf("plain %v but token %q for id %q", subjects.IsPlainID(id), tok, id)
			}
			if tok != id && tok[0] != subjects.IDMarker {
				t.Fatalf("encoded token %q lacks marker", tok)
			}
			got, err := subjects.DecodeID(tok)
			if err != nil || got != id {
				t.Fatalf("DecodeID(%q) = %q, %v; want %q", tok, got, err, id)
			}
			checkBuilders(t, "pool-1", id)
		})
	}
}

// checkBuilders verifies every builder yields a valid publish subject that
// parses back to the same id.
func checkBuilders(t *testing.T, agent, id string) {
	t.Helper()
	req, err := subjects.Request(agent, id)
	if err != nil {
		t.Fatalf("Request: %v", err)
	}
	mustPublishable(t, req)
	if !strings.HasPrefix(req, "e2a.req."+agent+".") || strings.Count(req, ".") != 3 {
		t.Fatalf("Request subject %q has wrong shape", req)
	}
	a, gotID, err := subjects.ParseRequest(req)
	if err != nil || a != agent || gotID != id {
		t.Fatalf("ParseRequest(%q) = %q, %q, %v", req, a, gotID, err)
	}
	for _, c := range []struct {
		build func(string) (string, error)
		parse func(string) (string, error)
		kind  subjects.Kind
	}{
		{subjects.Response, subjects.ParseResponse, subjects.KindResponse},
		{subjects.Live, subjects.ParseLive, subjects.KindLive},
		{subjects.Control, subjects.ParseControl, subjects.KindControl},
	} {
		s, err := c.build(id)
		if err != nil {
			t.Fatalf("build %v: %v", c.kind, err)
		}
		mustPublishable(t, s)
		if strings.Count(s, ".") != 2 {
			t.Fatalf("%v subject %q has wrong shape", c.kind, s)
		}
		got, err := c.parse(s)
		if err != nil || got != id {
			t.Fatalf("parse %q = %q, %v; want %q", s, got, err, id)
		}
		p, err := subjects.Parse(s)
		if err != nil || p.Kind != c.kind || p.RequestID != id {
			t.Fatalf("Parse(%q) = %+v, %v", s, p, err)
		}
	}
	p, err := subjects.Parse(req)
	if err != nil || p.Kind != subjects.KindRequest || p.Agent != agent || p.RequestID != id {
		t.Fatalf("Parse(%q) = %+v, %v", req, p, err)
	}
	// The filter of the pool matches the request subject.
	f, err := subjects.RequestFilter(agent)
	if err != nil {
		t.Fatal(err)
	}
	if !server.IsValidSubject(f) || !subjects.Matches(f, req) {
		t.Fatalf("filter %q does not match %q", f, req)
	}
	if !subjects.Matches(subjects.AllRequests, req) {
		t.Fatalf("%q does not match %q", subjects.AllRequests, req)
	}
}

func mustPublishable(t *testing.T, s string) {
	t.Helper()
	if !server.IsValidPublishSubject(s) || !server.IsValidLiteralSubject(s) {
		t.Fatalf("%.200q is not a valid NATS publish subject", s)
	}
	if !utf8.ValidString(s) {
		t.Fatalf("%.200q is not valid UTF-8", s)
	}
	// The subject is sent in a protocol line; keep it well under the
	// default 4 KiB limit.
	if len(s) > 2048 {
		t.Fatalf("subject of %d bytes", len(s))
	}
}

// TestMatchesLikeTheServer: Matches agrees with nats-server on every valid
// filter and subject of up to three tokens over a small alphabet.
func TestMatchesLikeTheServer(t *testing.T) {
	var subjs, filters []string
	var grow func(prefix []string, toks []string, out *[]string)
	grow = func(prefix []string, toks []string, out *[]string) {
		if len(prefix) > 0 {
			*out = append(*out, strings.Join(prefix, "."))
		}
		if len(prefix) == 3 {
			return
		}
		for _, tok := range toks {
			if len(prefix) > 0 && prefix[len(prefix)-1] == ">" {
				return
			}
			grow(append(append([]string(nil), prefix...), tok), toks, out)
		}
	}
	grow(nil, []string{"a", "b"}, &subjs)
	grow(nil, []string{"a", "b", "*", ">"}, &filters)
	n := 0
	for _, f := range filters {
		for _, s := range subjs {
			if got, want := subjects.Matches(f, s), server.SubjectMatchesFilter(s, f); got != want {
				t.Errorf("Matches(%q, %q) = %v, the server says %v", f, s, got, want)
			}
			n++
		}
	}
	if n < 500 {
		t.Fatalf("only %d pairs compared", n)
	}
}

func TestEncodedTokenIsKVKey(t *testing.T) {
	for name, id := range hostileIDs {
		tok, err := subjects.EncodeID(id)
		if err != nil {
			continue
		}
		for i := 0; i < len(tok); i++ {
			c := tok[i]
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_=", c) >= 0
			if !ok {
				t.Fatalf("%s: token %q has byte %q outside the KV key alphabet", name, tok, c)
			}
		}
	}
}

func TestDecodeIDRejects(t *testing.T) {
	tooLong := "=" + strings.Repeat("A", 1400)
	for _, tc := range []struct {
		tok  string
		want error
	}{
		{"", subjects.ErrInvalidToken},
		{".", subjects.ErrInvalidToken},
		{"a.b", subjects.ErrInvalidToken},
		{"*", subjects.ErrInvalidToken},
		{">", subjects.ErrInvalidToken},
		{"~abc", subjects.ErrInvalidToken},
		{strings.Repeat("a", 65), subjects.ErrInvalidToken}, // plain alphabet but too long to be plain
		{"=YWJj", subjects.ErrInvalidToken},                 // encodes the plain id "abc": not canonical
		{"=YWJj==", subjects.ErrInvalidToken},               // padding
		{"=YW+j", subjects.ErrInvalidToken},                 // std alphabet
		{"=YWJ", subjects.ErrInvalidToken},                  // non-zero trailing bits (strict)
		{"=A", subjects.ErrInvalidToken},                    // impossible length
		{"==", subjects.ErrInvalidToken},
		{tooLong, subjects.ErrIDTooLong},
	} {
		if got, err := subjects.DecodeID(tc.tok); !errors.Is(err, tc.want) {
			t.Errorf("DecodeID(%.40q) = %q, %v; want %v", tc.tok, got, err, tc.want)
		}
	}
	// "=" alone is the canonical token of the empty id.
	if id, err := subjects.DecodeID("="); err != nil || id != "" {
		t.Fatalf(`DecodeID("=") = %q, %v`, id, err)
	}
}

func TestPools(t *testing.T) {
	for _, p := range []string{"a", "pool_1", "Pool-2", strings.Repeat("p", 64)} {
		if err := subjects.ValidatePool(p); err != nil {
			t.Errorf("ValidatePool(%q): %v", p, err)
		}
	}
	for _, p := range []string{"", "a.b", "*", ">", "a b", "é", "=x", strings.Repeat("p", 65)} {
		if err := subjects.ValidatePool(p); !errors.Is(err, subjects.ErrInvalidPool) {
			t.Errorf("ValidatePool(%q) = %v", p, err)
		}
		if _, err := subjects.Request(p, "id"); !errors.Is(err, subjects.ErrInvalidPool) {
			t.Errorf("Request(%q) = %v", p, err)
		}
		if _, err := subjects.RequestFilter(p); !errors.Is(err, subjects.ErrInvalidPool) {
			t.Errorf("RequestFilter(%q) = %v", p, err)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, s := range []string{
		"", "e2a", "e2a.req", "e2a.req.pool", "e2a.req.pool.id.extra", "e2a.req..id",
		"e2a.resp", "e2a.resp.", "e2a.resp.a.b", "e2a.live.a.b", "e2a.ctl.a.b", "foo.bar",
		"e2a.request.pool.id", "E2A.req.pool.id",
	} {
		_, err := subjects.Parse(s)
		if err == nil {
			t.Errorf("Parse(%q) succeeded", s)
		}
	}
	if _, _, err := subjects.ParseRequest("e2a.resp.abc"); !errors.Is(err, subjects.ErrNotE2ASubject) {
		t.Errorf("ParseRequest(resp) = %v", err)
	}
	if _, err := subjects.ParseResponse("e2a.req.p.abc"); !errors.Is(err, subjects.ErrNotE2ASubject) {
		t.Errorf("ParseResponse(req) = %v", err)
	}
	if _, err := subjects.ParseLive("e2a.resp.abc"); !errors.Is(err, subjects.ErrNotE2ASubject) {
		t.Errorf("ParseLive(resp) = %v", err)
	}
	if _, err := subjects.ParseControl("e2a.ctl.a.b"); !errors.Is(err, subjects.ErrNotE2ASubject) {
		t.Errorf("ParseControl(a.b) = %v", err)
	}
	if _, _, err := subjects.ParseRequest("e2a.req.a*b.id"); !errors.Is(err, subjects.ErrInvalidPool) {
		t.Errorf("ParseRequest(bad pool) = %v", err)
	}
	if _, err := subjects.ParseResponse("e2a.resp.=YWJj"); !errors.Is(err, subjects.ErrInvalidToken) {
		t.Errorf("ParseResponse(non canonical) = %v", err)
	}
	if _, err := subjects.ParseResponse("e2a.resp.*"); !errors.Is(err, subjects.ErrInvalidToken) {
		t.Errorf("ParseResponse(*) = %v", err)
	}
}

func TestConstantsAreValid(t *testing.T) {
	for _, f := range []string{subjects.AllRequests, subjects.AllResponses, subjects.AllLive, subjects.AllControl, subjects.AllAudit} {
		if !server.IsValidSubject(f) {
			t.Errorf("%q is not a valid subject", f)
		}
	}
	for _, s := range []string{subjects.DirectGet("E2A_RESPONSES"), subjects.MaxDeliveriesAdvisory("E2A_REQUESTS", "agent-x"), subjects.ConsumerNext("E2A_REQUESTS", "agent-x"), subjects.AuditRequest(3), subjects.AuditResponse(15)} {
		mustPublishable(t, s)
	}
}

func TestFrameMsgID(t *testing.T) {
	for _, tc := range []struct {
		id  string
		seq int64
	}{{"abc", 0}, {"a:b", 12}, {"x y", 1 << 40}} {
		m := subjects.FrameMsgID(tc.id, tc.seq)
		id, seq, err := subjects.ParseFrameMsgID(m)
		if err != nil || id != tc.id || seq != tc.seq {
			t.Errorf("ParseFrameMsgID(%q) = %q, %d, %v", m, id, seq, err)
		}
	}
	if got := subjects.FrameMsgID("r1", 7); got != "r1:7" {
		t.Errorf("FrameMsgID = %q", got)
	}
	// Ids outside the request-id grammar get no deduplication id.
	for _, id := range []string{"", "\t", "dup ", "a\nb"} {
		if got := subjects.FrameMsgID(id, 3); got != "" {
			t.Errorf("FrameMsgID(%q) = %q, want none", id, got)
		}
	}
	for _, m := range []string{"abc", "abc:", "abc:x", "abc:-1", "abc:+1", "abc:99999999999999999999"} {
		if _, _, err := subjects.ParseFrameMsgID(m); !errors.Is(err, subjects.ErrInvalidMsgID) {
			t.Errorf("ParseFrameMsgID(%q) = %v", m, err)
		}
	}
}

// TestAuditPartitionMatchesServer checks that AuditPartition computes the
// partition the server's subject transform assigns, for requests and
// responses alike.
func TestAuditPartitionMatchesServer(t *testing.T) {
	const n = 16
	rs, rd := subjects.AuditRequestMapping(n)
	ps, pd := subjects.AuditResponseMapping(n)
	reqTr, err := server.NewSubjectTransform(rs, rd)
	if err != nil {
		t.Fatal(err)
	}
	respTr, err := server.NewSubjectTransform(ps, pd)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for name, id := range hostileIDs {
		if len(id) > subjects.MaxIDLength {
			continue
		}
		p, err := subjects.AuditPartition(id, n)
		if err != nil {
			t.Fatal(err)
		}
		seen[p] = true
		req, _ := subjects.Request("pool", id)
		resp, _ := subjects.Response(id)
		if got, err := reqTr.Match(req); err != nil || got != subjects.AuditRequest(p) {
			t.Errorf("%s: request maps to %q (%v), want %q", name, got, err, subjects.AuditRequest(p))
		}
		if got, err := respTr.Match(resp); err != nil || got != subjects.AuditResponse(p) {
			t.Errorf("%s: response maps to %q (%v), want %q", name, got, err, subjects.AuditResponse(p))
		}
	}
	if len(seen) < 4 {
		t.Errorf("partitions poorly spread: %v", seen)
	}
}

func TestRoundTripAllBytes(t *testing.T) {
	// Every single byte and every pair of a few interesting bytes.
	for b := 0; b < 256; b++ {
		id := string([]byte{byte(b)})
		roundTrip(t, id)
		roundTrip(t, "x"+id+"y")
	}
}

func roundTrip(t *testing.T, id string) {
	t.Helper()
	tok, err := subjects.EncodeID(id)
	if err != nil {
		t.Fatalf("EncodeID(%q): %v", id, err)
	}
	got, err := subjects.DecodeID(tok)
	if err != nil || got != id {
		t.Fatalf("round trip %q -> %q -> %q, %v", id, tok, got, err)
	}
	s, _ := subjects.Response(id)
	if !server.IsValidPublishSubject(s) {
		t.Fatalf("%q invalid", s)
	}
}

func TestRequestAnyPool(t *testing.T) {
	for _, id := range []string{"req-1", "a.b", "日本", ""} {
		f, err := subjects.RequestAnyPool(id)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := subjects.Request("pool-x", id)
		tok, _ := subjects.EncodeID(id)
		if f != "e2a.req.*."+tok || s != "e2a.req.pool-x."+tok {
			t.Fatalf("%q: filter %q, subject %q", id, f, s)
		}
	}
}

// The lease subject is inside E2A_RESPONSES's subjects and outside the
// frames' republish source and every response parser.
func TestResponseLease(t *testing.T) {
	for name, id := range hostileIDs {
		lease, err := subjects.ResponseLease(id)
		resp, rerr := subjects.Response(id)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("%s: lease err %v, response err %v", name, err, rerr)
		}
		if err != nil {
			continue
		}
		mustPublishable(t, lease)
		if lease != resp+".lease" {
			t.Errorf("%s: lease %q for frames on %q", name, lease, resp)
		}
		if !server.SubjectMatchesFilter(lease, subjects.AllResponses) || server.SubjectMatchesFilter(lease, subjects.AllResponseFrames) {
			t.Errorf("%s: %q: in %s %v, in %s %v", name, lease, subjects.AllResponses, server.SubjectMatchesFilter(lease, subjects.AllResponses),
				subjects.AllResponseFrames, server.SubjectMatchesFilter(lease, subjects.AllResponseFrames))
		}
		if !server.SubjectMatchesFilter(resp, subjects.AllResponseFrames) {
			t.Errorf("%s: frames on %q are not republished", name, resp)
		}
		if _, err := subjects.ParseResponse(lease); !errors.Is(err, subjects.ErrNotE2ASubject) {
			t.Errorf("%s: ParseResponse(%q) = %v", name, lease, err)
		}
		if _, err := subjects.Parse(lease); err == nil {
			t.Errorf("%s: Parse(%q) accepted a lease", name, lease)
		}
	}
}

// TestRequestPool: a request subject's pool, whatever its id token (one
// that does not decode too: ParseRequest refuses that subject); errors as
// ParseRequest's for anything else.
func TestRequestPool(t *testing.T) {
	for subj, want := range map[string]string{"e2a.req.demo.abc": "demo", "e2a.req.demo.=YWJj": "demo", "e2a.req.demo.a!b": "demo"} {
		if got, err := subjects.RequestPool(subj); err != nil || got != want {
			t.Errorf("RequestPool(%q) = %q, %v; want %q", subj, got, err, want)
		}
	}
	for _, subj := range []string{"e2a.resp.abc", "e2a.req.demo", "e2a.req.demo.a.b", "e2a.req.bad*pool.abc"} {
		if got, err := subjects.RequestPool(subj); err == nil {
			t.Errorf("RequestPool(%q) = %q, want an error", subj, got)
		}
	}
}
