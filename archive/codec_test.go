package archive_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/archive"
)

func sampleRecords() []archive.Record {
	return []archive.Record{
		{Seq: 7, Time: time.Unix(1764400000, 123456789), Subject: "e2a.audit.req.3",
			Header: nats.Header{"Nats-Stream-Source": {"E2A_REQUESTS 5 e2a.req.*.* e2a.audit.req.3 e2a.req.demo.r1"}, "E2A-Request-Id": {"r1"}},
			Data:   []byte(`{"request_id":"r1"}`)},
		{Seq: 8, Time: time.Unix(1764400001, 0), Subject: "e2a.audit.resp.3", Data: []byte(strings.Repeat(`{"sequence":0}`, 50))},
		{Seq: 9, Time: time.Unix(0, 0), Subject: "e2a.audit.resp.1", Header: nats.Header{"A": {"1", "2"}}},
	}
}

// Decode gives back what Encode took: sequences, times to the nanosecond,
// subjects, every header value in order, payloads.
func TestCodecRoundTrip(t *testing.T) {
	in := sampleRecords()
	b, err := archive.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := archive.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("%d records, want %d", len(out), len(in))
	}
	for i := range in {
		a, b := in[i], out[i]
		if a.Seq != b.Seq || !a.Time.Equal(b.Time) || a.Subject != b.Subject || !bytes.Equal(a.Data, b.Data) || len(a.Header) != len(b.Header) {
			t.Fatalf("record %d: %+v, want %+v", i, b, a)
		}
		for k, vs := range a.Header {
			if strings.Join(b.Header[k], "|") != strings.Join(vs, "|") {
				t.Fatalf("record %d header %s: %q, want %q", i, k, b.Header[k], vs)
			}
		}
	}
}

// Encode refuses a batch larger than MaxBatchBytes before compression.
func TestEncodeRefusesTooLargeBatches(t *testing.T) {
	big := []archive.Record{{Seq: 1, Subject: "s", Data: make([]byte, archive.MaxBatchBytes)}}
	if _, err := archive.Encode(big); !errors.Is(err, archive.ErrBatchTooLarge) {
		t.Fatalf("%v, want ErrBatchTooLarge", err)
	}
}

// FuzzDecode: any input is a batch or ErrCorrupt, never a panic; a batch
// that decodes encodes to the same records again.
func FuzzDecode(f *testing.F) {
	b, err := archive.Encode(sampleRecords())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte{})
	f.Add([]byte("not zstd"))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := archive.Decode(data)
		if err != nil {
			if !errors.Is(err, archive.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		again, err := archive.Encode(recs)
		if err != nil {
			t.Fatal(err)
		}
		back, err := archive.Decode(again)
		if err != nil || len(back) != len(recs) {
			t.Fatalf("re-decoded %d records (%v), want %d", len(back), err, len(recs))
		}
	})
}

// Decode of a corrupt batch allocates in proportion to what it
// decompresses to, within a small factor: a record claiming a million
// header values, or a megabyte of zero bytes (each an empty record), is
// refused before it costs more.
func TestDecodeBoundsMemory(t *testing.T) {
	const size = 1 << 20
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, raw := range map[string][]byte{
		"header count":  append(binary.AppendUvarint([]byte{1, 0, 0, 0}, size), make([]byte, size)...),
		"empty records": append([]byte{1}, make([]byte, size)...),
	} {
		data := enc.EncodeAll(raw, nil)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		recs, err := archive.Decode(data)
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > 8*size {
			t.Errorf("%s: Decode of %d bytes (%d decompressed) allocated %d MiB", name, len(data), len(raw), n>>20)
		}
		if !errors.Is(err, archive.ErrCorrupt) || recs != nil {
			t.Errorf("%s: %d records, %v; want ErrCorrupt", name, len(recs), err)
		}
	}
}
