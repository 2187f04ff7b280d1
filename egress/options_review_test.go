package egress

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestLiveBufferTooLargeRefused: WithLiveBuffer checks only n >= 1; a
// size no channel can have (math.MaxInt) is accepted by New and Open and
// then panics in make(chan *nats.Msg, n) (replay.go, prepare.go) instead
// of being refused with ErrInvalidOption.
func TestLiveBufferTooLargeRefused(t *testing.T) {
	_, nc := natstest.RunServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	call := func(f func() error) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return f()
	}
	t.Run("Open", func(t *testing.T) {
		err := call(func() error {
			r, err := Open(ctx, nc, "live-buffer", 0, WithLiveBuffer(math.MaxInt))
			if r != nil {
				r.Close()
			}
			return err
		})
		if !errors.Is(err, ErrInvalidOption) {
			t.Errorf("Open(WithLiveBuffer(MaxInt)) = %v, want an error wrapping ErrInvalidOption", err)
		}
	})
	t.Run("New", func(t *testing.T) {
		err := call(func() error {
			_, err := New(nc, WithReplayOptions(WithLiveBuffer(math.MaxInt)))
			return err
		})
		if !errors.Is(err, ErrInvalidOption) {
			t.Errorf("New(WithReplayOptions(WithLiveBuffer(MaxInt))) = %v, want an error wrapping ErrInvalidOption", err)
		}
	})
}

// TestNilConnectionRefused: New, Open and Replay with a nil *nats.Conn
// panic (nil dereference) where agent.Run, push.Run, push.NewStore and
// archive.Run refuse it with their ErrInvalidOption ("nil connection").
func TestNilConnectionRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cases := []struct {
		name string
		f    func() error
	}{
		{"New", func() error { _, err := New(nil); return err }},
		{"Open", func() error {
			r, err := Open(ctx, nil, "nil-conn", 0)
			if r != nil {
				r.Close()
			}
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := func() (err error) {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
					}
				}()
				return tc.f()
			}()
			if !errors.Is(err, ErrInvalidOption) {
				t.Errorf("%s(nil conn) = %v, want an error wrapping ErrInvalidOption", tc.name, err)
			}
		})
	}
}
