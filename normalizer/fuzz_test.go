package normalizer_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/normalizer"
)

// Fuzz targets, one per adapter. The seed corpus is kept in
// testdata/fuzz/<Target>/ (written from the golden inputs and the
// conformance templates by TestFuzzCorpus -update). Run one with e.g.
//
//	go test ./normalizer/ -run '^$' -fuzz '^FuzzA2A$' -fuzztime 20s
//
// Properties: never panic; every error is a *normalizer.Error wrapping one
// sentinel; every accepted body gives a complete envelope that is valid
// UTF-8, reads back through e2a.FromJSON to the same bytes, holds none of
// the header secrets, and (for OpSubmit) re-normalizes to itself; every
// error message is short and escapes the client values it quotes.
func FuzzE2A(f *testing.F)        { fuzzAdapter(f, normalizer.ProtocolE2A) }
func FuzzACP(f *testing.F)        { fuzzAdapter(f, normalizer.ProtocolACP) }
func FuzzA2A(f *testing.F)        { fuzzAdapter(f, normalizer.ProtocolA2A) }
func FuzzAgentVault(f *testing.F) { fuzzAdapter(f, normalizer.ProtocolAgentVault) }
func FuzzA2E(f *testing.F)        { fuzzAdapter(f, normalizer.ProtocolA2E) }
func FuzzWorkflow(f *testing.F)   { fuzzAdapter(f, normalizer.ProtocolWorkflow) }

var fuzzTargets = map[string]string{
	normalizer.ProtocolE2A:        "FuzzE2A",
	normalizer.ProtocolACP:        "FuzzACP",
	normalizer.ProtocolA2A:        "FuzzA2A",
	normalizer.ProtocolAgentVault: "FuzzAgentVault",
	normalizer.ProtocolA2E:        "FuzzA2E",
	normalizer.ProtocolWorkflow:   "FuzzWorkflow",
}

var sentinels = []error{normalizer.ErrParse, normalizer.ErrInvalidRequest, normalizer.ErrMethodNotFound, normalizer.ErrInvalidParams, normalizer.ErrUnsupportedOperation,
	normalizer.ErrPushNotificationNotSupported, normalizer.ErrExtendedCardNotConfigured, normalizer.ErrContentTypeNotSupported}

func fuzzAdapter(f *testing.F, protocol string) {
	n := testNormalizer(f)
	adapter, _ := n.Adapter(protocol)
	for _, c := range confCases {
		if c.protocol == protocol {
			f.Add(c.body(`1`, `"x"`, `{"a":[1,null]}`, false))
			f.Add(c.body(``, `"a\u00e9\ud83d\ude00"`, `null`, true))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := adapter(normalizer.Input{Body: body, Header: confHeaders(), Now: func() time.Time { return fixedNow }, NewID: counter()})
		if err != nil {
			var ne *normalizer.Error
			if !errors.As(err, &ne) {
				t.Fatalf("error is not a *normalizer.Error: %#v", err)
			}
			found := 0
			for _, s := range sentinels {
				if ne.Kind == s {
					found++
				}
			}
			if found != 1 || err.Error() == "" {
				t.Fatalf("error kind %v is not a sentinel", ne.Kind)
			}
			checkBoundedMessage(t, err.Error())
			if id := normalizer.ErrorJSONRPCID(err); !json.Valid(id) {
				t.Fatalf("error id %q is not JSON", id)
			}
			return
		}
		checkEnvelope(t, res)
		b, err := json.Marshal(res.Envelope)
		if err != nil {
			t.Fatal(err)
		}
		if !utf8.Valid(b) {
			t.Fatalf("envelope not valid UTF-8")
		}
		if bytes.Contains(b, []byte("SECRET-HDR")) {
			t.Fatalf("a header secret reached the envelope: %s", b)
		}
		if res.Op == normalizer.OpSubmit {
			again, err := n.FromE2A(normalizer.Input{Body: b, Now: func() time.Time { return fixedNow }})
			if err != nil {
				t.Fatalf("normalized envelope refused by FromE2A: %v\n%s", err, b)
			}
			if b2, _ := json.Marshal(again.Envelope); !bytes.Equal(b, b2) {
				t.Fatalf("re-normalizing changed the envelope:\n%s\n%s", b, b2)
			}
		}
		if protocol == normalizer.ProtocolACP {
			// Exporting never panics, and a successful export is JSON.
			if call, err := normalizer.EnvelopeToACPPeerCall(res.Envelope); err == nil {
				if _, err := json.Marshal(call); err != nil {
					t.Fatal(err)
				}
			}
		}
		_ = e2a.ResponseFor(res.Envelope)
	})
}

// TestFuzzCorpus keeps the checked-in seed corpus in step with the golden
// inputs: every golden input of a protocol seeds its fuzz target. With
// -update it (re)writes testdata/fuzz/<Target>/golden_*; otherwise it
// checks the files are there and current.
func TestFuzzCorpus(t *testing.T) {
	for _, proto := range normalizer.Protocols {
		target := fuzzTargets[proto]
		dir := filepath.Join("testdata", "fuzz", target)
		names := goldenNames(t, filepath.Join("testdata", "golden", proto))
		for _, name := range names {
			matches, _ := filepath.Glob(filepath.Join("testdata", "golden", proto, name+".in.*"))
			body, err := os.ReadFile(matches[0])
			if err != nil {
				t.Fatal(err)
			}
			testkit.FuzzSeed(t, filepath.Join(dir, "golden_"+name), body, *update)
		}
		if !*update {
			entries, _ := os.ReadDir(dir)
			count := 0
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), "golden_") {
					count++
				}
			}
			if count != len(names) {
				t.Errorf("%s has %d golden seeds, want %d (stale files? run -update after removing them)", dir, count, len(names))
			}
		}
	}
}
