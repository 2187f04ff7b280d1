package option_test

import (
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/e2a-pipeline/pipeline/internal/option"
)

var errInvalid = errors.New("pkg: invalid option")

type config struct {
	log *slog.Logger
	w   io.Writer
}

func TestNotNil(t *testing.T) {
	var c config
	l := slog.New(slog.DiscardHandler)
	if err := option.NotNil(errInvalid, "logger", l, func(c *config) { c.log = l })(&c); err != nil || c.log != l {
		t.Fatalf("a logger: %v, set %v", err, c.log == l)
	}
	if err := option.NotNil(errInvalid, "writer", io.Discard, func(c *config) { c.w = io.Discard })(&c); err != nil || c.w != io.Discard {
		t.Fatalf("a writer: %v", err)
	}

	var none *slog.Logger
	err := option.NotNil(errInvalid, "logger", none, func(c *config) { c.log = none })(&c)
	if !errors.Is(err, errInvalid) || err.Error() != "pkg: invalid option: nil logger" || c.log != l {
		t.Fatalf("a nil logger: %v (the logger set before kept: %v)", err, c.log == l)
	}
	var noW io.Writer
	err = option.NotNil(errInvalid, "writer", noW, func(c *config) { c.w = noW })(&c)
	if !errors.Is(err, errInvalid) || err.Error() != "pkg: invalid option: nil writer" || c.w != io.Discard {
		t.Fatalf("a nil writer: %v", err)
	}
}

type setting func(*config) error

func TestApply(t *testing.T) {
	l := slog.New(slog.DiscardHandler)
	var c config
	withLog := setting(option.NotNil(errInvalid, "logger", l, func(c *config) { c.log = l }))
	if err := option.Apply(errInvalid, &c, []setting{withLog}); err != nil || c.log != l {
		t.Fatalf("one option: %v, set %v", err, c.log == l)
	}
	if err := option.Apply(errInvalid, &c, []setting(nil)); err != nil {
		t.Fatalf("no option: %v", err)
	}

	var calls int
	count := func(*config) error { calls++; return nil }
	err := option.Apply(errInvalid, &config{}, []setting{count, nil, count})
	if !errors.Is(err, errInvalid) || err.Error() != "pkg: invalid option: nil option" || calls != 1 {
		t.Fatalf("a nil option: %v after %d calls, want the error after 1", err, calls)
	}
	var none *slog.Logger
	bad := setting(option.NotNil(errInvalid, "logger", none, func(c *config) { c.log = none }))
	err = option.Apply(errInvalid, &config{}, []setting{bad, count})
	if !errors.Is(err, errInvalid) || calls != 1 {
		t.Fatalf("a refused option: %v, %d calls after it, want its error and none", err, calls-1)
	}
	// An option's own error that does not wrap errInvalid is wrapped, its
	// own kept (ingress's WithAuth(nil), WithDefaultPool's ErrInvalidPool
	// were not its package's ErrInvalidOption).
	own := errors.New("pkg: the pool name is bad")
	err = option.Apply(errInvalid, &config{}, []setting{func(*config) error { return own }})
	if !errors.Is(err, errInvalid) || !errors.Is(err, own) {
		t.Fatalf("an option's own error: %v, want it wrapping %v and %v", err, errInvalid, own)
	}
}

func TestCheck(t *testing.T) {
	type limits struct{ n int }
	withN := func(n int) func(*limits) error {
		return option.Check(errInvalid, n >= 1, func(c *limits) { c.n = n }, "n %d < 1", n)
	}
	var c limits
	if err := withN(3)(&c); err != nil || c.n != 3 {
		t.Fatalf("a valid value: %v, set %d", err, c.n)
	}
	err := withN(0)(&c)
	if !errors.Is(err, errInvalid) || err.Error() != "pkg: invalid option: n 0 < 1" || c.n != 3 {
		t.Fatalf("a refused value: %v (the value set before kept: %d)", err, c.n)
	}
}
