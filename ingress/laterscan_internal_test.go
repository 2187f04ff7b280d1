package ingress

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/tenant"
)

// FuzzLaterScan: whatever a record holds, laterScan, when it can tell,
// says what the decoded record says (TaskRecord.later) for every id the
// record lists and one it does not; the seeds are records as ingress
// writes them and the spellings encoding/json reads alike (a member name
// in another case, a repeated member, escapes, null).
func FuzzLaterScan(f *testing.F) {
	for _, s := range []string{
		`{"id":"t","context_id":"c","protocol":"a2a","pool":"demo","principal":"alice","request_ids":["r1"],"created":"x","updated":"y"}`,
		`{"id":"t","request_ids":["r1","r2","r3"],"writers":["ops"]}`,
		`{"id":"t","request_ids":["r1","r2","r1"]}`,
		`{"id":"t","request_ids":null}`,
		`{"id":"t"}`,
		`{"id":"t","Request_IDs":["r1","r2"]}`,
		`{"request_ids":["r1"],"request_ids":["r1","r2"]}`,
		`{"request_ids":["r\u0031","r2"]}`,
		`{"request_ids":[ "r1" , "r2" ] }`,
		`{"request_ids":["r1",2]}`,
		`[]`,
		`{"request_ids":["r1","r2"`,
	} {
		f.Add([]byte(s), "r1")
	}
	f.Fuzz(func(t *testing.T, data []byte, after string) {
		var rec TaskRecord
		decoded := json.Unmarshal(data, &rec) == nil
		for _, a := range append(rec.RequestIDs, after, "") {
			next, ok := laterScan(data, a)
			if ok && decoded && next != rec.later(a) {
				t.Fatalf("laterScan(%q, %q) = %q, the decoded record's later is %q", data, a, next, rec.later(a))
			}
		}
	})
}

// TestLaterScanReads: the records ingress writes are read by the scan,
// not decoded.
func TestLaterScanReads(t *testing.T) {
	rec := TaskRecord{ID: "t", ContextID: "c", Protocol: "a2a", Pool: "demo", Principal: "alice", RequestIDs: []string{"r1", "r2"}, Writers: []string{"ops"}}
	data, _ := json.Marshal(rec)
	for after, want := range map[string]string{"r1": "r2", "r2": "", "r9": ""} {
		if next, ok := laterScan(data, after); !ok || next != want {
			t.Errorf("laterScan(%s, %q) = %q %v, want %q", data, after, next, ok, want)
		}
	}
}

// BenchmarkLaterTurn: the record read every streamed turn of a task pays
// at its end (TaskStore.laterTurn), for a one-turn record (nothing
// follows), in process with the embedded server (its side counted in the
// allocations too). docs/performance.md quotes it.
func BenchmarkLaterTurn(b *testing.B) {
	ctx := context.Background()
	ts, _ := newTaskStore(b)
	id, rid := uuid.NewString(), uuid.NewString()
	if _, err := ts.AppendNew(ctx, KindTask, TaskRecord{ID: id, ContextID: uuid.NewString(), Protocol: "a2a", Pool: "demo", Principal: "alice"},
		rid, tenant.Principal{ID: "alice"}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if next, _, err := ts.laterTurn(ctx, KindTask, id, rid); err != nil || next != "" {
			b.Fatal(next, err)
		}
	}
}
