package normalizer_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/normalizer"
)

// update rewrites the golden files: go test ./normalizer/ -run Golden -update
var update = flag.Bool("update", false, "rewrite golden files under testdata/golden")

// fixedNow is the clock of every golden and conformance test.
var fixedNow = time.Date(2026, 3, 30, 10, 0, 0, 0, time.UTC)

// counter returns a deterministic NewID: id-0001, id-0002, …
func counter() func() string {
	n := 0
	return func() string { n++; return fmt.Sprintf("id-%04d", n) }
}

// testNormalizer is the configuration of the goldens: a default pool, a
// method prefix rule, a channel rule and one A2E plugin type.
func testNormalizer(t testing.TB) *normalizer.Normalizer {
	t.Helper()
	routes, err := normalizer.ParseRoutes("default=demo; method:tool/*=tools; channel:feishu=feishu")
	if err != nil {
		t.Fatal(err)
	}
	reg := normalizer.NewRegistry()
	if err := reg.Register(normalizer.A2EType{Type: "tool/call/req", Model: "ToolCallRequest", Required: []string{"req_id", "name"}}); err != nil {
		t.Fatal(err)
	}
	return normalizer.New(normalizer.Config{Routes: routes, A2ETypes: reg})
}

// goldenOut is what a golden .out.json holds.
type goldenOut struct {
	Pool         string          `json:"pool,omitempty"`
	Op           normalizer.Op   `json:"op,omitempty"`
	Notification bool            `json:"notification,omitempty"`
	Envelope     *e2a.Envelope   `json:"envelope,omitempty"`
	Error        *goldenError    `json:"error,omitempty"`
	Call         json.RawMessage `json:"acp_call,omitempty"`
	PeerCall     json.RawMessage `json:"acp_peer_call,omitempty"`
	CallError    *goldenError    `json:"acp_call_error,omitempty"`
	PeerError    *goldenError    `json:"acp_peer_call_error,omitempty"`
}

type goldenError struct {
	Kind        string                 `json:"kind"`
	JSONRPCCode int                    `json:"jsonrpc_code"`
	HTTPStatus  int                    `json:"http_status"`
	A2ECode     string                 `json:"a2e_code"`
	JSONRPCID   json.RawMessage        `json:"jsonrpc_id"`
	ReqID       string                 `json:"req_id,omitempty"`
	Message     string                 `json:"message"`
	Lines       []normalizer.LineError `json:"lines,omitempty"`
}

func describeError(err error) *goldenError {
	if err == nil {
		return nil
	}
	g := &goldenError{
		JSONRPCCode: normalizer.JSONRPCCode(err), HTTPStatus: normalizer.HTTPStatus(err),
		A2ECode: normalizer.A2ECode(err), JSONRPCID: normalizer.ErrorJSONRPCID(err), Message: err.Error(),
	}
	for _, s := range []error{normalizer.ErrParse, normalizer.ErrInvalidRequest, normalizer.ErrMethodNotFound, normalizer.ErrInvalidParams, normalizer.ErrUnsupportedOperation,
		normalizer.ErrContentTypeNotSupported, normalizer.ErrPushNotificationNotSupported, normalizer.ErrExtendedCardNotConfigured} {
		if errors.Is(err, s) {
			g.Kind = s.Error()
		}
	}
	var ne *normalizer.Error
	if errors.As(err, &ne) {
		g.ReqID = ne.ReqID
		g.Lines = ne.Lines
		g.Message = ne.ClientMessage() // what the front doors answer
	}
	return g
}

// readInput reads <name>.in.<ext> and the optional <name>.headers. Header
// lines "Key: value"; pseudo-headers X-Test-Principal (user[,origin[,asserts]]),
// X-Test-Agent, X-Test-Channel and X-Test-Request-Id set Input fields.
func readInput(t *testing.T, base string) normalizer.Input {
	t.Helper()
	matches, _ := filepath.Glob(base + ".in.*")
	if len(matches) != 1 {
		t.Fatalf("want one input for %s, found %v", base, matches)
	}
	body, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	in := normalizer.Input{Body: body, Now: func() time.Time { return fixedNow }, NewID: counter()}
	hf, err := os.Open(base + ".headers")
	if err != nil {
		return in
	}
	defer hf.Close()
	in.Header = http.Header{}
	sc := bufio.NewScanner(hf)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch http.CanonicalHeaderKey(k) {
		case "X-Test-Principal":
			f := strings.Split(v, ",")
			p := &normalizer.Principal{UserID: f[0]}
			if len(f) > 1 {
				p.IdentityOrigin = f[1]
			}
			p.AssertsUser = len(f) > 2 && f[2] == "asserts"
			in.Principal = p
		case "X-Test-Agent":
			in.Agent = v
		case "X-Test-Channel":
			in.Channel = v
		case "X-Test-Request-Id":
			in.RequestID = v
		default:
			in.Header.Add(k, v)
		}
	}
	return in
}

func marshalGolden(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func goldenNames(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.in.*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden inputs in %s", dir)
	}
	var names []string
	for _, f := range files {
		b := filepath.Base(f)
		names = append(names, b[:strings.Index(b, ".in.")])
	}
	return names
}

// TestGolden runs every input under testdata/golden/<protocol>/ through its
// adapter and compares the result (envelope, pool, op, or the error as the
// front door would answer it) with <name>.out.json.
func TestGolden(t *testing.T) {
	n := testNormalizer(t)
	for _, proto := range normalizer.Protocols {
		adapter, _ := n.Adapter(proto)
		dir := filepath.Join("testdata", "golden", proto)
		for _, name := range goldenNames(t, dir) {
			t.Run(proto+"/"+name, func(t *testing.T) {
				base := filepath.Join(dir, name)
				in := readInput(t, base)
				before := append([]byte(nil), in.Body...)
				res, err := adapter(in)
				if !bytes.Equal(before, in.Body) {
					t.Fatal("adapter modified the input body")
				}
				out := goldenOut{Error: describeError(err)}
				if err == nil {
					out.Pool, out.Op, out.Notification, out.Envelope = res.Pool, res.Op, res.Notification, res.Envelope
					checkEnvelope(t, res)
				}
				testkit.Golden(t, base+".out.json", marshalGolden(t, out), *update)
			})
		}
	}
}

// TestGoldenACPExport runs every envelope under testdata/golden/acp_export/
// through EnvelopeToACPJSONRPCCall (spec shape) and EnvelopeToACPPeerCall.
func TestGoldenACPExport(t *testing.T) {
	dir := filepath.Join("testdata", "golden", "acp_export")
	for _, name := range goldenNames(t, dir) {
		t.Run(name, func(t *testing.T) {
			base := filepath.Join(dir, name)
			body, err := os.ReadFile(base + ".in.json")
			if err != nil {
				t.Fatal(err)
			}
			env, err := e2a.FromJSON(body)
			if err != nil {
				t.Fatal(err)
			}
			before, _ := json.Marshal(env)
			var out goldenOut
			if call, err := normalizer.EnvelopeToACPJSONRPCCall(env); err != nil {
				out.CallError = describeError(err)
			} else {
				out.Call = marshalGolden(t, call)
			}
			if call, err := normalizer.EnvelopeToACPPeerCall(env); err != nil {
				out.PeerError = describeError(err)
			} else {
				out.PeerCall = marshalGolden(t, call)
			}
			after, _ := json.Marshal(env)
			if !bytes.Equal(before, after) {
				t.Errorf("export modified the envelope:\n%s\n%s", before, after)
			}
			testkit.Golden(t, base+".out.json", marshalGolden(t, out), *update)
		})
	}
}

// TestSpec11_4 checks the exact shape of spec §11.4 from the §11.3
// envelope, independently of the golden file.
func TestSpec11_4(t *testing.T) {
	env, err := e2a.FromJSON([]byte(`{"method":"session/prompt","jsonrpc_id":42,"session_id":"s1","params":{"session_id":"s1","prompt":[{"type":"text","text":"hi"}]},"provenance":{"source_protocol":"acp","details":{"jsonrpc_method":"session/prompt"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	call, err := normalizer.EnvelopeToACPJSONRPCCall(env)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(call)
	want := `{"jsonrpc":"2.0","id":42,"method":"session/prompt","params":{"prompt":[{"text":"hi","type":"text"}],"session_id":"s1"}}`
	if string(got) != want {
		t.Errorf("§11.4:\n got %s\nwant %s", got, want)
	}
}

// checkEnvelope asserts what every successful normalization guarantees.
func checkEnvelope(t *testing.T, res *normalizer.Result) {
	t.Helper()
	env := res.Envelope
	switch {
	case env == nil:
		t.Fatal("nil envelope")
	case env.ProtocolVersion == "":
		t.Error("no protocol_version")
	case env.RequestID == "":
		t.Error("no request_id")
	case env.Timestamp == "":
		t.Error("no timestamp")
	case env.Provenance == nil || env.Provenance.SourceProtocol == "" || env.Provenance.Converter == "" || env.Provenance.ConvertedAt == "":
		t.Errorf("provenance incomplete: %+v", env.Provenance)
	case res.Pool == "" || !normalizer.ValidPool(res.Pool):
		t.Errorf("pool %q", res.Pool)
	case res.Op == "":
		t.Error("no op")
	}
	if _, err := e2a.ParseTime(env.Timestamp); err != nil {
		t.Errorf("timestamp %q is not RFC 3339", env.Timestamp)
	}
	if env.Auth != nil && env.Auth.BearerToken != "" {
		t.Error("bearer token kept")
	}
	// The envelope is valid E2A: it reads back and writes the same.
	w1, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	back, err := e2a.FromJSON(w1)
	if err != nil {
		t.Fatalf("envelope does not read back: %v", err)
	}
	w2, _ := json.Marshal(back)
	if !bytes.Equal(w1, w2) {
		t.Errorf("envelope not stable through e2a:\n%s\n%s", w1, w2)
	}
}
