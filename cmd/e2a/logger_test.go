package main

import (
	"log"
	"log/slog"
	"os"
	"testing"
)

// TestProcessLoggerIsDefault: the process's logger is slog's default too,
// so that what logs through slog.Default (the A2A renderers' warning about
// an unreadable frame) writes in E2A_LOG_FORMAT through the redaction.
func TestProcessLoggerIsDefault(t *testing.T) {
	before := slog.Default()
	t.Cleanup(func() {
		slog.SetDefault(before)
		// Setting the default handler back leaves the log package writing
		// to the replaced one: put it back.
		log.SetOutput(os.Stderr)
		log.SetFlags(log.LstdFlags)
	})
	l, err := processLogger(Config{LogFormat: "json", LogLevel: "info"})
	if err != nil {
		t.Fatal(err)
	}
	if slog.Default() != l {
		t.Error("slog.Default() is not the process's logger")
	}
	if _, err := processLogger(Config{LogFormat: "xml", LogLevel: "info"}); err == nil {
		t.Error("an unknown log format was accepted")
	}
}
