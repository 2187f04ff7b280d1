package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
)

// A handler's *Error becomes the final e2a.error frame; the frame must be
// valid (§12.5: a code and a message) whatever the *Error holds, as Fail
// fills them in: an empty code is handler_error, an empty message the code.
// A typed nil *Error (a function returning `var e *agent.Error`) is an
// error like any other: the worker answers it and keeps serving (it
// dereferenced the nil pointer on the delivery's goroutine, unrecovered,
// and the process died).
func TestHandlerErrorValueEdgeCases(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		switch env.ParamString("do") {
		case "empty":
			return &agent.Error{}
		case "no-message":
			return agent.Errorf("quota_exceeded", true, "")
		case "nil-error":
			var e *agent.Error
			return e
		}
		return nil
	})
	startWorker(t, s.connect(t), "aerr", h, agent.WithConcurrency(1))
	waitConsumer(t, s.js, "aerr")
	cases := []struct{ do, code, message string }{
		{"empty", e2a.ErrCodeHandlerError, e2a.ErrCodeHandlerError},
		{"no-message", "quota_exceeded", "quota_exceeded"},
		{"nil-error", e2a.ErrCodeHandlerError, ""},
	}
	for _, c := range cases {
		publish(t, s.js, "aerr", request("aerr-"+c.do, map[string]any{"do": c.do}))
	}
	for _, c := range cases {
		fr := waitFinal(t, s.nc, "aerr-"+c.do, 10*time.Second)
		last := fr[len(fr)-1]
		if err := last.Validate(); err != nil {
			t.Errorf("%s: final frame invalid: %v", c.do, err)
		}
		e, err := last.Error()
		if err != nil {
			t.Errorf("%s: final %s: %v", c.do, last.ResponseKind, err)
			continue
		}
		if e.Code != c.code || (c.message != "" && e.Message != c.message) {
			t.Errorf("%s: final code %q message %q, want %q %q", c.do, e.Code, e.Message, c.code, c.message)
		}
	}
}

// A handler_error's message, cut to 1 KiB, is cut on a character boundary:
// a cut inside a character left a replacement character (U+FFFD) in the
// message the client reads.
func TestHandlerErrorMessageCutOnCharacter(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	long := "x" + strings.Repeat("é", 1000) // 'é' is 2 bytes: byte 1024 is inside one
	h := agent.HandlerFunc(func(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
		return errors.New(long)
	})
	startWorker(t, s.connect(t), "cut", h, agent.WithConcurrency(1))
	waitConsumer(t, s.js, "cut")
	publish(t, s.js, "cut", request("cut-1", nil))
	fr := waitFinal(t, s.nc, "cut-1", 10*time.Second)
	e, err := fr[len(fr)-1].Error()
	if err != nil {
		t.Fatal(err)
	}
	msg := strings.TrimSuffix(e.Message, "…")
	if msg == e.Message || strings.ContainsRune(msg, utf8.RuneError) || !strings.HasPrefix(long, msg) || len(msg) > 1024 {
		t.Fatalf("message cut to %q… (%d bytes), want a prefix of the error of at most 1024 bytes marked …", msg[len(msg)-8:], len(msg))
	}
}

// A nil map (or a pointer to one) as a chunk's delta encodes as null, which
// Chunk refuses for a nil delta (§12.5: a string or an object): it was
// published as "delta": null, through Chunk and through Write alike.
func TestChunkNilMapDeltaRefused(t *testing.T) {
	t.Parallel()
	var nilMap map[string]any
	errs, frames := runWrites(t, "spec-nil-map", func(w agent.Writer) []error {
		return []error{
			w.Chunk(e2a.DeltaTool, nilMap),
			w.Chunk(e2a.DeltaCustom, &nilMap),
			w.Write(e2a.KindChunk, e2a.StatusInProgress, e2a.ChunkBody{DeltaKind: e2a.DeltaTool, Delta: nilMap}, false),
		}
	})
	for i, what := range []string{"Chunk(tool, nil map)", "Chunk(custom, &nil map)", "Write(e2a.chunk, ChunkBody{tool, nil map})"} {
		if errs[i] == nil {
			t.Errorf("%s returned nil", what)
		}
	}
	for _, f := range frames {
		if strings.Contains(string(f), `"delta":null`) {
			t.Errorf("a chunk with a null delta was published: %s", f)
		}
	}
}

// Run refuses a nil handler with ErrInvalidOption; a nil HandlerFunc is
// one too (it was served: every request ended handler_panic).
func TestRunRefusesNilHandlerFunc(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx, cancel := context.WithTimeout(tctx(t), 10*time.Second)
	defer cancel()
	var h agent.HandlerFunc
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx, s.nc, "nilh", h) }()
	err := testkit.Receive(t, done, 5*time.Second, "Run with a nil HandlerFunc serves the pool, want ErrInvalidOption at once")
	if !errors.Is(err, agent.ErrInvalidOption) {
		t.Fatalf("Run with a nil HandlerFunc: %v, want ErrInvalidOption", err)
	}
}

// TestCancelNilJetStreamRefused: Cancel with a nil JetStream is refused
// with ErrInvalidOption, as Run refuses a nil connection; it panicked.
func TestCancelNilJetStreamRefused(t *testing.T) {
	if _, err := agent.Cancel(context.Background(), nil, "r-1"); !errors.Is(err, agent.ErrInvalidOption) {
		t.Fatalf("Cancel with a nil JetStream: %v, want ErrInvalidOption", err)
	}
}
