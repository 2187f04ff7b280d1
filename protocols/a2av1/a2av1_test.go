package a2av1

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/nats-io/nats.go"
	"google.golang.org/grpc/codes"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/host"
)

func TestCursor(t *testing.T) {
	at := time.Date(2026, 11, 25, 12, 0, 0, 123456789, time.UTC)
	t0 := at.Add(time.Minute)
	c, err := decodeCursor(cursor{t0: t0, at: at, id: "t\n1"}.encode())
	if err != nil || !c.t0.Equal(t0) || !c.at.Equal(at) || c.id != "t\n1" {
		t.Fatalf("round trip: %+v %v", c, err)
	}
	// The listing's order: as of t0, most recent first; then the tasks
	// changed since, by id.
	keys := []cursor{{t0, t0.Add(time.Second), "c2"}, {t0, at, "b"}, {t0, t0.Add(2 * time.Second), "c1"}, {t0, at.Add(time.Second), "a"}, {t0, at, "a"}}
	slices.SortFunc(keys, cursor.compare)
	var order []string
	for _, k := range keys {
		order = append(order, k.id)
	}
	if want := []string{"a", "a", "b", "c1", "c2"}; !slices.Equal(order, want) || !keys[0].at.Equal(at.Add(time.Second)) {
		t.Errorf("order %v (first at %v), want %v", order, keys[0].at, want)
	}
	if c, err := decodeCursor(""); c != nil || err != nil {
		t.Errorf("no token: %+v %v", c, err)
	}
	// Not base64url; no newline; the update time of an earlier token; a
	// token without the listing's start.
	for _, bad := range []string{"!", "bm8tbmV3bGluZQ", base64.RawURLEncoding.EncodeToString([]byte("2026-11-25T12:00:00Z\nt")),
		base64.RawURLEncoding.EncodeToString([]byte("1764331200000000000\nt"))} {
		if _, err := decodeCursor(bad); !errors.Is(err, errCursor) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestSDKError(t *testing.T) {
	for _, c := range []struct {
		err  error
		want error
	}{
		{egress.ErrNotFound, a2a.ErrTaskNotFound},
		{fmt.Errorf("x: %w", host.ErrSessionNotFound), a2a.ErrTaskNotFound},
		{egress.ErrNotCancelable, a2a.ErrTaskNotCancelable},
		{host.ErrInvalidPool, a2a.ErrInvalidParams},
		{host.ErrUnknownPool, a2a.ErrInvalidParams},
		{host.ErrConflict, a2a.ErrInvalidParams},
		{host.ErrTooLarge, a2a.ErrInvalidRequest},
		{host.ErrTaskTerminal, a2a.ErrUnsupportedOperation},
		{context.Canceled, context.Canceled},
		// The caller's deadline (gRPC's grpc-timeout) is the SDK's
		// DEADLINE_EXCEEDED (HTTP 504), whichever side's timer fires first.
		{fmt.Errorf("x: %w", context.DeadlineExceeded), context.DeadlineExceeded},
		{fmt.Errorf("x: %w", normalizer.ErrContentTypeNotSupported), a2a.ErrUnsupportedContentType},
		{fmt.Errorf("x: %w", normalizer.ErrPushNotificationNotSupported), a2a.ErrPushNotificationNotSupported},
		{fmt.Errorf("x: %w", normalizer.ErrExtendedCardNotConfigured), a2a.ErrExtendedCardNotConfigured},
		{host.ErrBackpressure, errTemporary},
		// A read of the frames the NATS server left unanswered (egress's
		// unavailable) is temporary: 503 UNAVAILABLE with RetryInfo.
		{fmt.Errorf("x: %w", nats.ErrTimeout), errTemporary},
		{errors.New("anything else"), a2a.ErrServerError},
	} {
		if got := sdkError(c.err); !errors.Is(got, c.want) {
			t.Errorf("%v: %v, want %v", c.err, got, c.want)
		}
	}
	if sdkError(nil) != nil {
		t.Error("nil")
	}
}

func TestGRPCCode(t *testing.T) {
	for code, want := range map[string]codes.Code{"unauthenticated": codes.Unauthenticated, "forbidden": codes.PermissionDenied,
		"rate_limit_exceeded": codes.ResourceExhausted, "unavailable": codes.Unavailable} {
		if got := grpcCode(code); got != want {
			t.Errorf("%s: %v, want %v", code, got, want)
		}
	}
}

func TestRESTRefuse(t *testing.T) {
	w := httptest.NewRecorder()
	restRefuse(w, host.Refusal{Status: http.StatusTooManyRequests, Message: "slow down"})
	var body struct {
		Error struct {
			Code            int
			Status, Message string
		}
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != 429 || body.Error.Code != 429 ||
		body.Error.Status != "RESOURCE_EXHAUSTED" || body.Error.Message != "slow down" {
		t.Fatalf("%d %s %v", w.Code, w.Body, err)
	}
}

// An HTTP+JSON refusal carries its wait and data as google.rpc details,
// as the JSON-RPC and gRPC bindings' do (AUTH.md, Rate limits): a 429 of
// the rate limit had only its Retry-After header.
func TestRESTRefuseDetails(t *testing.T) {
	w := httptest.NewRecorder()
	restRefuse(w, host.Refusal{Status: http.StatusTooManyRequests, Message: "slow down", RetryAfter: 30 * time.Second,
		Data: map[string]any{"limit": 1, "window": "minute"}})
	var body struct {
		Error struct {
			Details []map[string]any
		}
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	var delay string
	var limit any
	for _, d := range body.Error.Details {
		switch d["@type"] {
		case "type.googleapis.com/google.rpc.RetryInfo":
			delay, _ = d["retryDelay"].(string)
		case "type.googleapis.com/google.protobuf.Struct":
			limit = d["limit"]
		}
	}
	if delay != "30s" || limit != float64(1) {
		t.Fatalf("details %s; want a RetryInfo of 30s and the data as a Struct", w.Body)
	}
}

// TestCheckCall: a batch and a v0.3 method are answered before the SDK
// reads the body; another call goes on with its body intact.
func TestCheckCall(t *testing.T) {
	for _, c := range []struct {
		body string
		ok   bool
		want string
	}{
		{`[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]`, false, `"code":-32600`},
		{`{"jsonrpc":"2.0","id":"a","method":"message/send"}`, false, `"id":"a"`},
		{`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}`, true, ""},
	} {
		r := httptest.NewRequest(http.MethodPost, Path, strings.NewReader(c.body))
		w := httptest.NewRecorder()
		if _, got := checkCall(w, r, 1<<20); got != c.ok {
			t.Errorf("%s: %v", c.body, got)
		}
		if !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("%s: answered %s", c.body, w.Body)
		}
		if c.ok {
			if b, _ := io.ReadAll(r.Body); string(b) != c.body {
				t.Errorf("body %q", b)
			}
		}
	}
}

// TestCall: a call without the binding's caller is an internal error; an
// A2A-Version other than 1.0 is refused.
func TestCall(t *testing.T) {
	h := &handler{}
	if _, err := h.GetTask(context.Background(), &a2a.GetTaskRequest{ID: "t"}); !errors.Is(err, a2a.ErrInternalError) {
		t.Errorf("no caller: %v", err)
	}
	for v, ok := range map[string]bool{"": true, "1": true, "1.0": true, "1.0.2": true, "0.3": false, "1.1": false} {
		_, err := h.call(withCall(context.Background(), call{version: v}))
		if (err == nil) != ok || (!ok && !errors.Is(err, a2a.ErrVersionNotSupported)) {
			t.Errorf("version %q: %v", v, err)
		}
	}
}
