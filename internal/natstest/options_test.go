package natstest

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestOptionsRefuseBadValues checks that every option refuses its bad
// values with ErrInvalidOption and accepts good ones. WithoutStreams and
// WithSyncAlways have no argument.
func TestOptionsRefuseBadValues(t *testing.T) {
	badCfg := Config()
	badCfg.Replicas = 0
	bad := map[string]Option{
		"invalid config":      WithConfig(badCfg),
		"zero max payload":    WithMaxPayload(0),
		"negative payload":    WithMaxPayload(-1),
		"payload over 64 MiB": WithMaxPayload(64<<20 + 1),
		"nil option":          nil,
	}
	for name, o := range bad {
		if _, err := buildOptions([]Option{o}); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", name, err)
		}
	}
	o, err := buildOptions([]Option{WithConfig(Config()), WithMaxPayload(64 << 20), WithoutStreams(), WithSyncAlways()})
	if err != nil || o.embedded.MaxPayload != 64<<20 || !o.noApply || !o.embedded.SyncAlways {
		t.Fatalf("good options: %+v %v", o, err)
	}
}

// fatalTB records the message of Fatalf and ends its goroutine, as
// testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, a ...any) {
	f.msg = fmt.Sprintf(format, a...)
	runtime.Goexit()
}

// TestBadOptionFailsTheTest checks that RunServer and RunCluster fail the
// test with the option's error before starting anything.
func TestBadOptionFailsTheTest(t *testing.T) {
	for name, run := range map[string]func(tb testing.TB){
		"RunServer":  func(tb testing.TB) { RunServer(tb, WithMaxPayload(0)) },
		"RunCluster": func(tb testing.TB) { RunCluster(tb, 3, WithMaxPayload(0)) },
	} {
		tb := &fatalTB{TB: t}
		done := make(chan struct{})
		go func() { defer close(done); run(tb) }()
		<-done
		if !strings.Contains(tb.msg, ErrInvalidOption.Error()) {
			t.Errorf("%s failed with %q, want the invalid option", name, tb.msg)
		}
	}
}
