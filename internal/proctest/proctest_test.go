package proctest

import "testing"

// TestStart: the port comes from the program's "listening on" line (in
// the forms Python and Node print), and the program is killed at cleanup
// (sleep would otherwise outlive the test by a minute).
func TestStart(t *testing.T) {
	sh := Need(t, "sh", "a POSIX shell")
	for line, want := range map[string]int{
		"listening on 4321":              4321,
		"listening on: 127.0.0.1:8765":   8765,
		"server up; listening on [::]:9": 9,
	} {
		if got := Start(t, sh, "-c", "echo starting; echo '"+line+"'; exec sleep 60"); got != want {
			t.Errorf("%q: port %d, want %d", line, got, want)
		}
	}
}
