package a2av1

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// FuzzProtoJSONNames checks the door's reading of a SendMessage request
// (callParams, as JSON-RPC's params and HTTP+JSON's body are read: proto
// field names, then numbers) against ProtoJSON's own parser (protojson
// into a2apb.SendMessageRequest): what ProtoJSON takes is never refused
// (but for a role number naming no Role, refused here), and the members
// read by either name come out as ProtoJSON reads them; a member it
// refuses as sent twice (by one name or both, "duplicate field" or, in a
// Struct, "duplicate map key") is refused.
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
		`{"message":{"messageId":"a"},"message":null}`, `{"metadata":{"a":{"b":1,"\u0062":2}}}`, `{"message":{"parts":[{"text":"a","text":"a"}]}}`,
		`{"message":{"messageId":"a"},"Message":{"messageId":"b"}}`, `{"message":{"message_id":"m","MessageId":"n"}}`, `{"metadata":{"k":1,"K":2}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := callParams(methodSendMessage, data)
		var pb a2apb.SendMessageRequest
		pbErr := protojson.Unmarshal(data, &pb)
		if pbErr != nil && strings.Contains(pbErr.Error(), "duplicate") && err == nil && json.Valid(data) {
			// (A text that is not JSON is refused before: checkEnvelope,
			// checkRESTBody.)
			t.Fatalf("%q: read as %s; ProtoJSON refuses a member sent twice: %v", data, out, pbErr)
		}
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
// against the gRPC-gateway's reading of it (gatewayQuery): a value it
// takes is taken, as the name of the TaskState it reads (but for a number
// beyond 32 bits, which it wraps into one and which is refused here); a
// value it refuses is refused.
func FuzzRESTListStatus(f *testing.F) {
	for _, s := range []string{"3", "TASK_STATE_COMPLETED", "0", "9", "-1", "+3", "03", "4294967299", "x", "", " 3", "3.0", "TASK_STATE_UNSPECIFIED"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		gatewayQuery(t, "status="+url.QueryEscape(v))
	})
}

// FuzzRESTQuery checks the HTTP+JSON GETs' reading of their query
// (restQuery, for each route that reads one) against the gRPC-gateway's
// (gatewayQuery): parameters by either name, repeated, with the gateway's
// [key] syntax or a path, unknown ones, and queries that are no
// URL-encoded form.
func FuzzRESTQuery(f *testing.F) {
	for _, s := range []string{"page_size=3&pageSize=3", "pageSize=3&pageSize=4", "context_id=a&history_length=2&include_artifacts=1",
		"status_timestamp_after=2026-01-01T00:00:00.5Z&status=2", "pageSize[x]=1", "page_size.x=1", "foo=1&foo=2", "pageSize=",
		"status_timestamp_after.seconds=5", "statusTimestampAfter=0000-12-31T00:00:00Z", "pageToken=a&page_token=b", "historyLength=%2B2",
		"includeArtifacts=T&contextId=", "tenant=x", "id=a&id=b&task_id=c", "=1&[a]=2",
		"tenant=a&tenant=b", "tenant[x]=1", "tenant.x=1", "tenant=&pageSize=2", "tenant=a&historyLength=x", "tenant=a&lastUpdatedAfter=2026-01-01T00:00:00Z",
		"%zz", "pageSize=%G1", "tenant=a&foo=%", "pageSize=1;historyLength=2", "tenant=a;b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) { gatewayQuery(t, raw) })
}

// gatewayQuery checks restQuery's reading of the query raw against the
// gRPC-gateway's (runtime.PopulateQueryParameters into the request
// messages of the routes whose query it reads, their path parameters
// filtered as its generated code filters them), on each route without a
// path tenant and with one (`/{tenant}/…`, whose filter takes the
// query's tenant out). A query the gateway refuses is refused
// (InvalidParams); one it reads is read alike: the query as rewritten,
// read as the SDK's handler reads it (each field's JSON name, first
// value), with the tenant restQuery returns (the call's pool), is the
// message the gateway reads. Refused here where the gateway reads it, as
// restQuery says: a field by both its names, a path into
// status_timestamp_after, a TaskState number beyond 32 bits.
// lastUpdatedAfter, an alias the gateway does not read, is left out.
func gatewayQuery(t *testing.T, raw string) {
	t.Helper()
	q, _ := url.ParseQuery(raw)
	delete(q, lastUpdatedAfter)
	for _, c := range []struct {
		method, path string
		msg          func() proto.Message
		filter       []string // the path's fields but the tenant
	}{
		{http.MethodGet, restListPath, func() proto.Message { return &a2apb.ListTasksRequest{} }, nil},
		{http.MethodGet, restListPath + "/a", func() proto.Message { return &a2apb.GetTaskRequest{} }, []string{"id"}},
		{http.MethodGet, restListPath + "/a/pushNotificationConfigs", func() proto.Message { return &a2apb.ListTaskPushNotificationConfigsRequest{} }, []string{"task_id"}},
		{http.MethodGet, restListPath + "/a:subscribe", func() proto.Message { return &a2apb.SubscribeToTaskRequest{} }, []string{"id"}},
		{http.MethodGet, restListPath + "/a/pushNotificationConfigs/c", func() proto.Message { return &a2apb.GetTaskPushNotificationConfigRequest{} }, []string{"task_id", "id"}},
		{http.MethodDelete, restListPath + "/a/pushNotificationConfigs/c", func() proto.Message { return &a2apb.DeleteTaskPushNotificationConfigRequest{} }, []string{"task_id", "id"}},
		{http.MethodGet, restExtendedCardPath, func() proto.Message { return &a2apb.GetExtendedAgentCardRequest{} }, nil},
	} {
		for _, pathTenant := range []bool{false, true} {
			var filter [][]string
			for _, f := range c.filter {
				filter = append(filter, []string{f})
			}
			if pathTenant {
				filter = append(filter, []string{"tenant"})
			}
			gatewayRoute(t, raw, q, c.method, c.path, pathTenant, c.msg, filter)
		}
	}
}

// gatewayRoute is gatewayQuery's check of one route (method, path), with
// a path tenant or without, against the gateway's reading of raw (q
// parsed, lastUpdatedAfter taken out) into msg with filter: its
// generated code's, req.ParseForm then runtime.PopulateQueryParameters,
// on a route with a field that its path does not hold (HasQueryParam),
// none on another.
func gatewayRoute(t *testing.T, raw string, q url.Values, method, path string, pathTenant bool, msg func() proto.Message, filter [][]string) {
	t.Helper()
	ourRaw := q.Encode()
	if _, err := url.ParseQuery(raw); err != nil {
		ourRaw = raw
	}
	ours, _, tenant, _, err := restQuery(method, path, ourRaw, pathTenant)
	fields, _ := queryFields(method, path)
	pb := msg()
	var gwErr error
	if pb.ProtoReflect().Descriptor().Fields().Len() > len(filter) {
		req := &http.Request{Method: method, URL: &url.URL{RawQuery: raw}}
		if gwErr = req.ParseForm(); gwErr == nil {
			gwErr = runtime.PopulateQueryParameters(pb, q, utilities.NewDoubleArray(filter))
		}
	}
	where := fmt.Sprintf("%s %s (path tenant: %v)", method, path, pathTenant)
	if err != nil {
		if !errors.Is(err, a2a.ErrInvalidParams) {
			t.Fatalf("%q, %s: error of another kind: %v", raw, where, err)
		}
		if gwErr == nil && !refusedHereOnly(q, fields) {
			t.Fatalf("%q, %s: refused (%v); the gateway reads %v", raw, where, err, pb)
		}
		return
	}
	if gwErr != nil {
		t.Fatalf("%q, %s: read as %q; the gateway refuses it: %v", raw, where, ours.Encode(), gwErr)
	}
	// The SDK's handler reads each field's JSON name, its first value,
	// "" as none; the tenant is the call's pool (restCall).
	sdk := url.Values{}
	if tenant != "" {
		sdk.Set(tenantField.json, tenant)
	}
	for _, f := range fields {
		if v := ours.Get(f.json); v != "" && f != tenantField {
			sdk.Set(f.json, v)
			if f.kind == queryInt32 {
				if _, err := strconv.Atoi(v); err != nil {
					t.Fatalf("%q, %s: %s=%q, which the SDK does not read", raw, where, f.json, v)
				}
			}
		}
	}
	got := msg()
	if err := runtime.PopulateQueryParameters(got, sdk, utilities.NewDoubleArray(nil)); err != nil || !proto.Equal(got, pb) {
		t.Fatalf("%q, %s: read as %q, tenant %q (%v, %v); the gateway reads %v", raw, where, ours.Encode(), tenant, got, err, pb)
	}
}

// refusedHereOnly reports whether q is one readQuery refuses where the
// gateway reads it (restQuery): a field given by more than one parameter,
// a path into a timestamp, a TaskState number beyond 32 bits.
func refusedHereOnly(q url.Values, fields []queryField) bool {
	by := map[int]int{}
	for k, v := range q {
		name, _ := queryKey(k, v)
		head, _, dotted := strings.Cut(name, ".")
		i := slices.IndexFunc(fields, func(f queryField) bool { return f.proto == head || f.json == head })
		if i < 0 {
			continue
		}
		if by[i]++; by[i] > 1 || dotted && fields[i].kind == queryTimestamp {
			return true
		}
		if n, err := strconv.Atoi(v[0]); fields[i].kind == queryTaskState && err == nil && int64(n) != int64(int32(n)) {
			return true
		}
	}
	return false
}
