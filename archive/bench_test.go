package archive_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/e2a-pipeline/pipeline/archive"
)

// BenchmarkEncode measures the archiver's compression of a 1 MiB batch of
// request-sized records (a request of the demo: its envelope and one
// burst of frames, ≈ 5.8 KB in E2A_AUDIT), per record.
func BenchmarkEncode(b *testing.B) {
	recs := benchRecords(180)
	b.SetBytes(int64(recordBytes(recs)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := archive.Encode(recs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode measures reading such a batch back.
func BenchmarkDecode(b *testing.B) {
	recs := benchRecords(180)
	data, err := archive.Encode(recs)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(recordBytes(recs)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := archive.Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

func benchRecords(n int) []archive.Record {
	recs := make([]archive.Record, 0, 2*n)
	for i := range n {
		id := fmt.Sprintf("0193a1b2-%04x-7000-8000-%012x", i, i*7919)
		h := nats.Header{"Nats-Stream-Source": {"E2A_REQUESTS " + fmt.Sprint(i) + " e2a.req.*.* e2a.audit.req.{{partition(16,2)}} e2a.req.demo." + id}, "E2A-Request-Id": {id}}
		recs = append(recs,
			archive.Record{Seq: uint64(2*i + 1), Time: time.Unix(1764400000, int64(i)), Subject: "e2a.audit.req.3", Header: h,
				Data: []byte(`{"request_id":"` + id + `","method":"chat.send","params":{"text":"question ` + fmt.Sprint(i) + `"}}`)},
			archive.Record{Seq: uint64(2*i + 2), Time: time.Unix(1764400000, int64(i)), Subject: "e2a.audit.resp.3", Header: h,
				Data: []byte(strings.Repeat(`{"request_id":"`+id+`","sequence":1,"response_kind":"e2a.chunk","body":{"delta":"some words of an answer"}}`+"\n", 9))})
	}
	return recs
}

func recordBytes(recs []archive.Record) int {
	n := 0
	for _, r := range recs {
		n += len(r.Data) + len(r.Subject)
	}
	return n
}
