package streams_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/e2a-pipeline/pipeline/streams"
)

// TestPageSeq: PageSeq asks for each page from the sequence after the last
// message of the one before, and ends on ErrNoMessages (nothing yielded), on
// another error (yielded once), on a page saying no more follow, on an empty
// page, or when the loop stops.
func TestPageSeq(t *testing.T) {
	boom := errors.New("boom")
	stored := []uint64{3, 4, 7, 9, 10}
	pages := func(size int, last error) (func(uint64) ([]streams.RawMsg, bool, error), *[]uint64) {
		var asked []uint64
		return func(seq uint64) ([]streams.RawMsg, bool, error) {
			asked = append(asked, seq)
			var out []streams.RawMsg
			for _, s := range stored {
				if s >= seq && len(out) < size {
					out = append(out, streams.RawMsg{Seq: s})
				}
			}
			if len(out) == 0 {
				return nil, false, last
			}
			return out, out[len(out)-1].Seq != stored[len(stored)-1], nil
		}, &asked
	}
	read := func(seq func(func(streams.RawMsg, error) bool)) (got []uint64, errs []error) {
		for m, err := range seq {
			if err != nil {
				errs = append(errs, err)
				continue
			}
			got = append(got, m.Seq)
		}
		return got, errs
	}

	page, asked := pages(2, streams.ErrNoMessages)
	got, errs := read(streams.PageSeq(4, page))
	if !slices.Equal(got, []uint64{4, 7, 9, 10}) || errs != nil || !slices.Equal(*asked, []uint64{4, 8}) {
		t.Fatalf("from 4 by 2: got %v, errors %v, pages asked from %v", got, errs, *asked)
	}
	page, _ = pages(2, streams.ErrNoMessages)
	if got, errs := read(streams.PageSeq(11, page)); got != nil || errs != nil {
		t.Fatalf("past the end: got %v, errors %v", got, errs)
	}
	page, _ = pages(2, boom)
	if got, errs := read(streams.PageSeq(11, page)); got != nil || len(errs) != 1 || !errors.Is(errs[0], boom) {
		t.Fatalf("an error: got %v, errors %v", got, errs)
	}
	page, asked = pages(2, nil)
	var first []uint64
	for m := range streams.PageSeq(0, page) {
		first = append(first, m.Seq)
		if len(first) == 3 {
			break
		}
	}
	if !slices.Equal(first, []uint64{3, 4, 7}) || !slices.Equal(*asked, []uint64{0, 5}) {
		t.Fatalf("stopped after 3: got %v, pages asked from %v", first, *asked)
	}
	empty := func(uint64) ([]streams.RawMsg, bool, error) { return nil, true, nil }
	if got, errs := read(streams.PageSeq(0, empty)); got != nil || errs != nil {
		t.Fatalf("an empty page saying more follow: got %v, errors %v", got, errs)
	}
}
