package ingress

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
)

// TestNewRefusesBadOptionsWithErrInvalidOption: every option refusal of
// New must wrap ErrInvalidOption (as WithProtocols(nil) and a nil option
// do), and a nil logger must be refused, not accepted silently.
func TestNewRefusesBadOptionsWithErrInvalidOption(t *testing.T) {
	_, nc := natstest.RunServer(t)
	eg, err := egress.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		opt  Option
	}{
		{"WithAuth(nil)", WithAuth(nil)},
		{"WithPushStore(nil)", WithPushStore(nil)},
		{"WithMaxBodyBytes(0)", WithMaxBodyBytes(0)},
		{"WithMaxBodyBytes(-1)", WithMaxBodyBytes(-1)},
		{"WithPublishTimeout(0)", WithPublishTimeout(0)},
		{"WithPublishTimeout(-1s)", WithPublishTimeout(-1)},
		{"WithPoolCheck(-1)", WithPoolCheck(-1)},
		{"WithA2AGRPCAddress(no port)", WithA2AGRPCAddress("no-port")},
		{"WithPublicURL(bad)", WithPublicURL("http://[::1")},
		{"WithDefaultPool(empty)", WithDefaultPool("")},
		{"WithWorkflowRateLimits(negative)", WithWorkflowRateLimits(RateLimits{PerMinute: -1})},
		{"WithLogger(nil)", WithLogger(nil)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(nc, eg, tc.opt)
			if !errors.Is(err, ErrInvalidOption) {
				t.Errorf("New(%s) = %v, want an error wrapping ErrInvalidOption", tc.name, err)
			}
		})
	}
}

// TestNewAuthNilOptionNoPanic: a nil AuthOption in NewAuth's list is a bad
// option, refused with an error like option.Apply refuses one, not a panic.
func TestNewAuthNilOptionNoPanic(t *testing.T) {
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		_, err = NewAuth(&AuthConfig{}, nil)
		return err
	}()
	if err == nil || strings.HasPrefix(err.Error(), "panic:") {
		t.Fatalf("NewAuth(cfg, nil option) = %v, want an error refusing the nil option", err)
	}
}

// TestNewNilArgumentsNoPanic: New with a nil *egress.Service (New checks
// eg != nil before SetReadGate, server.go) or a nil *nats.Conn panics
// (egress.(*Service).Heartbeat on nil in bindProtocols; jetstream.New)
// instead of returning an error wrapping ErrInvalidOption, as agent.Run
// and push.Run refuse a nil connection.
func TestNewNilArgumentsNoPanic(t *testing.T) {
	_, nc := natstest.RunServer(t)
	eg, err := egress.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		nc   *nats.Conn
		eg   *egress.Service
	}{
		{"nil egress", nc, nil},
		{"nil connection", nil, eg},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := func() (err error) {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
					}
				}()
				_, err = New(tc.nc, tc.eg)
				return err
			}()
			if !errors.Is(err, ErrInvalidOption) {
				t.Errorf("New(%s) = %v, want an error wrapping ErrInvalidOption", tc.name, err)
			}
		})
	}
}
