package subjects_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/e2a-pipeline/pipeline/subjects"
)

// FuzzEncodeDecode checks that every id round-trips through its token and
// every subject built from it, and that DecodeID never accepts a token that
// EncodeID would not produce. The seed corpus is in testdata/fuzz.
func FuzzEncodeDecode(f *testing.F) {
	for _, id := range []string{"abc", "", ".", "=", "=YWJj", "a b", "日本"} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// s as an id.
		tok, err := subjects.EncodeID(s)
		if len(s) > subjects.MaxIDLength {
			if !errors.Is(err, subjects.ErrIDTooLong) {
				t.Fatalf("EncodeID(%d bytes) = %v", len(s), err)
			}
		} else {
			if err != nil {
				t.Fatalf("EncodeID(%q): %v", s, err)
			}
			id, err := subjects.DecodeID(tok)
			if err != nil || id != s {
				t.Fatalf("DecodeID(EncodeID(%q)) = %q, %v", s, id, err)
			}
			for _, build := range []func(string) (string, error){subjects.Response, subjects.Live, subjects.Control} {
				subj, err := build(s)
				if err != nil || !server.IsValidPublishSubject(subj) {
					t.Fatalf("subject %q for %q invalid: %v", subj, s, err)
				}
				p, err := subjects.Parse(subj)
				if err != nil || p.RequestID != s {
					t.Fatalf("Parse(%q) = %+v, %v", subj, p, err)
				}
			}
		}
		// s as a token: accepted only if canonical.
		if id, err := subjects.DecodeID(s); err == nil {
			back, err := subjects.EncodeID(id)
			if err != nil || back != s {
				t.Fatalf("DecodeID(%q) = %q but EncodeID gives %q, %v", s, id, back, err)
			}
		}
	})
}

// FuzzValidateRequestID checks the promises of the request-id grammar on any
// string: an accepted id is 1..MaxIDLength bytes of valid UTF-8 without
// outer white space or line breaks, and it and its frame message id read
// back exactly from a NATS header; a refused one wraps ErrInvalidID and has
// no frame message id. The seed corpus is in testdata/fuzz.
func FuzzValidateRequestID(f *testing.F) {
	for _, id := range []string{"dup", "dup ", "\t", "a b", "\u200b", "\xff"} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkID(t, s)
	})
}
