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
