package a2av1

import (
	"cmp"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/protobuf/encoding/protojson"
)

// FuzzProtoJSONNames checks the door's reading of a SendMessage request
// (callParams, as JSON-RPC's params and HTTP+JSON's body are read: proto
// field names, then numbers) against ProtoJSON's own parser (protojson
// into a2apb.SendMessageRequest): what ProtoJSON takes is never refused
// (but for a role number naming no Role, refused here), and the members
// read by either name come out as ProtoJSON reads them. (A member sent
// by both names, refused by both, is TestProtoJSONParams'.)
func FuzzProtoJSONNames(f *testing.F) {
	for _, s := range []string{
		`{"message":{"message_id":"m","context_id":"c","task_id":"t","role":"ROLE_USER","parts":[{"text":"x","media_type":"text/plain"}],"reference_task_ids":["a"]},` +
			`"configuration":{"history_length":2,"accepted_output_modes":["text/plain"]}}`,
		`{"message":{"messageId":"m","message_id":"m"}}`,
		`{"message":{"message_id":"m","messageId":"n"}}`,
		`{"configuration":{"history_length":"1","historyLength":1}}`,
		`{"configuration":{"history_length":"3","accepted_output_modes":null}}`,
		`{"message":{"message\u005fid":"m","role":2}}`,
		`{"message":{"messageId":"m","metadata":{"a_b":1,"aB":2},"parts":[{"data":{"k_v":1,"kV":2}}]}}`,
		`{"message":{"messageId":"m","parts":[{"text":"a","media_type":"x","mediaType":"y"}]}}`,
		`{"message":{"message_id":null,"role":1}}`, `{"message":null}`, `{}`, `[]`, `null`, `{"a_b":1,"aB":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := callParams(methodSendMessage, data)
		var pb a2apb.SendMessageRequest
		pbErr := protojson.Unmarshal(data, &pb)
		if err != nil {
			if !errors.Is(err, a2a.ErrInvalidParams) {
				t.Fatalf("%q: error of another kind: %v", data, err)
			}
			if _, known := a2apb.Role_name[int32(pb.GetMessage().GetRole())]; pbErr == nil && known {
				t.Fatalf("%q: refused (%v); ProtoJSON reads %v", data, err, &pb)
			}
			return
		}
		if json.Valid(data) && !json.Valid(out) {
			t.Fatalf("%q: rewritten into invalid JSON %q", data, out)
		}
		if pbErr != nil {
			return // the SDK's JSON reads more (unknown members, any case)
		}
		type message struct {
			MessageID        string   `json:"messageId"`
			ContextID        string   `json:"contextId"`
			TaskID           string   `json:"taskId"`
			ReferenceTaskIDs []string `json:"referenceTaskIds"`
		}
		var got struct {
			Message       *message `json:"message"`
			Configuration *struct {
				HistoryLength       *int     `json:"historyLength"`
				AcceptedOutputModes []string `json:"acceptedOutputModes"`
			} `json:"configuration"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q: ProtoJSON reads %v; the SDK's decoding of %s: %v", data, &pb, out, err)
		}
		m, c := pb.GetMessage(), pb.GetConfiguration()
		gm, gc := cmp.Or(got.Message, &message{}), got.Configuration
		hl, modes := -1, []string(nil)
		if gc != nil {
			modes = gc.AcceptedOutputModes
			if gc.HistoryLength != nil {
				hl = *gc.HistoryLength
			}
		}
		want := -1
		if c != nil && c.HistoryLength != nil {
			want = int(c.GetHistoryLength())
		}
		if gm.MessageID != m.GetMessageId() || gm.ContextID != m.GetContextId() || gm.TaskID != m.GetTaskId() ||
			!slices.Equal(gm.ReferenceTaskIDs, m.GetReferenceTaskIds()) || hl != want || !slices.Equal(modes, c.GetAcceptedOutputModes()) {
			t.Fatalf("%q: read %s; ProtoJSON reads %v", data, out, &pb)
		}
	})
}

// FuzzRESTListStatus checks the HTTP+JSON ListTasks query's status
// (queryStatus) against the gRPC-gateway's reading of a2a.proto's
// ListTasksRequest from a query (runtime.PopulateQueryParameters): a value
// it takes is taken, as the name of the TaskState it reads (but for a
// number beyond 32 bits, which it wraps into one and which is refused
// here); a value it refuses is never rewritten, and is refused here when
// it is a number (a name is the handler's to refuse).
func FuzzRESTListStatus(f *testing.F) {
	for _, s := range []string{"3", "TASK_STATE_COMPLETED", "0", "9", "-1", "+3", "03", "4294967299", "x", "", " 3", "3.0", "TASK_STATE_UNSPECIFIED"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		st, err := queryStatus(url.Values{"status": {v}})
		var pb a2apb.ListTasksRequest
		gwErr := runtime.PopulateQueryParameters(&pb, url.Values{"status": {v}}, utilities.NewDoubleArray(nil))
		n, atoiErr := strconv.Atoi(v)
		switch {
		case gwErr == nil && atoiErr == nil && int64(n) != int64(int32(n)):
			if err == nil {
				t.Fatalf("%q: read as %q; want it refused (beyond 32 bits)", v, st)
			}
		case gwErr == nil:
			if err != nil || st != pb.GetStatus().String() {
				t.Fatalf("%q: read as %q, %v; the gateway reads %v", v, st, err, pb.GetStatus())
			}
		case err == nil && st != v:
			t.Fatalf("%q: rewritten as %q; the gateway refuses it: %v", v, st, gwErr)
		case err == nil && atoiErr == nil:
			t.Fatalf("%q: a number the gateway refuses (%v), taken", v, gwErr)
		case err != nil && !errors.Is(err, a2a.ErrInvalidParams):
			t.Fatalf("%q: error of another kind: %v", v, err)
		}
	})
}
