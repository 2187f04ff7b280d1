package e2a_test

import (
	"bytes"
	"errors"
	"strconv"
	"testing"

	"github.com/e2a-pipeline/pipeline/e2a"
)

func TestBurstCount(t *testing.T) {
	for v, want := range map[string]int{"": 1, "1": 1, "2": 2, "1024": 1024} {
		if n, err := e2a.BurstCount(v); err != nil || n != want {
			t.Errorf("BurstCount(%q) = %d, %v; want %d", v, n, err, want)
		}
	}
	for _, v := range []string{"0", "-1", "+2", "02", "1025", "x", " 2", "2 ", "99999999999999999999"} {
		if _, err := e2a.BurstCount(v); !errors.Is(err, e2a.ErrInvalidBurst) {
			t.Errorf("BurstCount(%q) error = %v, want ErrInvalidBurst", v, err)
		}
	}
}

func TestSplitBurst(t *testing.T) {
	single := []byte("{\n  \"sequence\": 0\n}") // one frame may have any layout
	got, err := e2a.SplitBurst("", single)
	if err != nil || len(got) != 1 || !bytes.Equal(got[0], single) {
		t.Fatalf("SplitBurst(\"\", pretty) = %q, %v", got, err)
	}
	var b []byte
	for i := range 3 {
		b = e2a.AppendBurst(b, []byte(`{"sequence":`+strconv.Itoa(i)+`}`))
	}
	got, err = e2a.SplitBurst("3", b)
	if err != nil || len(got) != 3 || string(got[2]) != `{"sequence":2}` {
		t.Fatalf("SplitBurst(3) = %q, %v", got, err)
	}
	frame, rest := e2a.NextInBurst(b)
	if string(frame) != `{"sequence":0}` || string(rest) != `{"sequence":1}`+"\n"+`{"sequence":2}` {
		t.Fatalf("NextInBurst = %q, %q", frame, rest)
	}
	for _, tc := range []struct{ count, data string }{
		{"2", `{}`},         // too few
		{"2", "{}\n{}\n{}"}, // too many
		{"2", "{}\n"},       // empty last
		{"2", "\n{}"},       // empty first
		{"3", "{}\n\n{}"},   // empty middle
		{"0", `{}`},         // bad count
		{"two", "{}\n{}"},   // bad count
		{"2", "{}\n{}\n"},   // trailing line feed
	} {
		if _, err := e2a.SplitBurst(tc.count, []byte(tc.data)); !errors.Is(err, e2a.ErrInvalidBurst) {
			t.Errorf("SplitBurst(%q, %q) error = %v, want ErrInvalidBurst", tc.count, tc.data, err)
		}
	}
}

// FuzzSplitBurst: what SplitBurst accepts joins back to its input, in as
// many non-empty pieces as the count says, none with a line feed.
func FuzzSplitBurst(f *testing.F) {
	f.Add("2", []byte("{}\n{}"))
	f.Add("", []byte("{\n}"))
	f.Add("3", []byte("a\nb\nc"))
	f.Add("2", []byte("\n"))
	f.Fuzz(func(t *testing.T, count string, data []byte) {
		frames, err := e2a.SplitBurst(count, data)
		if err != nil {
			if !errors.Is(err, e2a.ErrInvalidBurst) {
				t.Fatalf("error %v does not wrap ErrInvalidBurst", err)
			}
			if _, cerr := e2a.CheckBurst(count, data); cerr == nil {
				t.Fatalf("CheckBurst accepts what SplitBurst refuses (%v)", err)
			}
			return
		}
		n, _ := e2a.BurstCount(count)
		if m, cerr := e2a.CheckBurst(count, data); cerr != nil || m != n {
			t.Fatalf("CheckBurst = %d, %v where SplitBurst holds %d frames", m, cerr, n)
		}
		if last, m, lerr := e2a.LastInBurst(count, data); lerr != nil || m != n || !bytes.Equal(last, frames[n-1]) {
			t.Fatalf("LastInBurst = %q, %d, %v; want %q", last, m, lerr, frames[n-1])
		}
		if len(frames) != n {
			t.Fatalf("%d frames for count %q", len(frames), count)
		}
		if n > 1 {
			var joined []byte
			for _, fr := range frames {
				if len(fr) == 0 || bytes.IndexByte(fr, '\n') >= 0 {
					t.Fatalf("piece %q", fr)
				}
				joined = e2a.AppendBurst(joined, fr)
			}
			if !bytes.Equal(joined, data) {
				t.Fatalf("joined %q != %q", joined, data)
			}
		}
	})
}
