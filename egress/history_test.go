package egress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/e2a-pipeline/pipeline/archive"
	"github.com/e2a-pipeline/pipeline/internal/natstest"
	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/streams"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// fakeHistory is a History holding the requests put in it, counting its
// lookups. With gate set, Request waits for it without looking at its
// context (a History that ignores it); err, when set, is its answer.
type fakeHistory struct {
	mu      sync.Mutex
	reqs    map[string]HistoricRequest
	calls   []string
	err     error
	panics  bool
	gate    chan struct{}
	entered chan string
	running atomic.Int64
	most    atomic.Int64
}

func newFakeHistory() *fakeHistory {
	return &fakeHistory{reqs: map[string]HistoricRequest{}, entered: make(chan string, 64)}
}

func (f *fakeHistory) Request(ctx context.Context, id string) (HistoricRequest, error) {
	n := f.running.Add(1)
	defer f.running.Add(-1)
	for {
		m := f.most.Load()
		if n <= m || f.most.CompareAndSwap(m, n) {
			break
		}
	}
	f.mu.Lock()
	f.calls = append(f.calls, id)
	h, ok := f.reqs[id]
	err, panics, gate := f.err, f.panics, f.gate
	f.mu.Unlock()
	f.entered <- id
	if gate != nil {
		<-gate
	}
	switch {
	case panics:
		panic("history broken")
	case err != nil:
		return HistoricRequest{}, err
	case !ok:
		return HistoricRequest{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return h, nil
}

func (f *fakeHistory) lookups() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// historyHTTP serves the read API with history h and the principals of
// TestAuthorizerGuardsEndpoints' keys (owner u_001, other u-2, audit sees
// all).
func historyHTTP(t *testing.T, h History, opts ...Option) (*testEnv, *httptest.Server) {
	t.Helper()
	e, _, srv := historyService(t, h, opts...)
	return e, srv
}

// historyService is historyHTTP, with the Service.
func historyService(t *testing.T, h History, opts ...Option) (*testEnv, *Service, *httptest.Server) {
	t.Helper()
	e := startEnv(t)
	s, err := New(e.nc, append([]Option{WithHistory(h), WithProjections(testProjections), WithAuthorizer(func(r *http.Request) (tenant.Principal, error) {
		switch r.Header.Get("X-Api-Key") {
		case "owner":
			return tenant.Principal{ID: "u_001"}, nil
		case "other":
			return tenant.Principal{ID: "u-2"}, nil
		case "audit":
			return tenant.Principal{ID: "ops", Roles: []tenant.Role{tenant.RoleAudit}}, nil
		}
		return tenant.Principal{}, errors.New("no")
	})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	s.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); s.Close() })
	return e, s, srv
}

// read is a read of the E2A read API with key.
func read(t *testing.T, url, key string, hdr ...string) testkit.Answer {
	t.Helper()
	return testkit.Get(t, url, append([]string{"X-Api-Key", key}, hdr...)...)
}

// storedHistoric reads what the hot streams hold of id as a History
// gives it: the envelope and the frames, bursts split.
func storedHistoric(t *testing.T, e *testEnv, id string) HistoricRequest {
	t.Helper()
	env, frames := natstest.StoredRequest(t, e.nc, id)
	h := HistoricRequest{Envelope: env}
	for _, f := range frames {
		h.Frames = append(h.Frames, HistoricFrame{Raw: f.Raw, StreamSeq: f.Seq})
	}
	return h
}

// historicRequest stores a finished request of u_001 (two chunks, then a
// burst of two chunks and the final frame) and returns its id.
func historicRequest(t *testing.T, e *testEnv) string {
	t.Helper()
	id := uuid.Must(uuid.NewV7()).String()
	w := e.running(t, id)
	w.text("a ")
	w.text("b ")
	natstest.PublishBurst(t, e.nc, id, 2, w.lastSeq, natstest.Frame(id, 2, false), natstest.Frame(id, 3, false), natstest.Frame(id, 4, true))
	return id
}

// A request the hot streams no longer hold is answered from the History
// exactly as the hot streams answered it: every read of
// testkit.ReadAPIReads, byte for byte, to its owner (whose ownership the History's envelope
// gives) and to a principal that sees every request; another principal
// gets the 404 of an unknown id.
func TestHistoryAnswersAsTheHotStreams(t *testing.T) {
	fh := newFakeHistory()
	e, srv := historyHTTP(t, fh)
	id := historicRequest(t, e)
	base := srv.URL + "/v1/requests/" + id
	hot := map[string]testkit.Answer{}
	for _, c := range testkit.ReadAPIReads {
		hot[c.Name] = read(t, base+c.Path, "owner", c.Hdr...)
		if got := read(t, base+c.Path, "audit", c.Hdr...); got != hot[c.Name] {
			t.Fatalf("%s: the auditor's hot testkit.Answer differs from the owner's:\n%+v\n%+v", c.Name, got, hot[c.Name])
		}
	}
	if a := hot["json"]; a.Status != 200 || a.ContentType != "application/json" {
		t.Fatalf("hot json: %+v", a)
	}
	if a := hot["sse past the final frame"]; a.Status != http.StatusNoContent {
		t.Fatalf("hot resume past the end: %+v", a)
	}
	if n := len(fh.lookups()); n != 0 {
		t.Fatalf("the History was asked %d times while the hot streams held the request", n)
	}
	fh.reqs[id] = storedHistoric(t, e, id)
	natstest.Purge(t, e.js, streams.RequestsStream, streams.ResponsesStream)
	unknown := read(t, srv.URL+"/v1/requests/"+uuid.Must(uuid.NewV7()).String(), "owner")
	if unknown.Status != 404 {
		t.Fatalf("unknown id: %+v", unknown)
	}
	for _, key := range []string{"owner", "audit"} {
		for _, c := range testkit.ReadAPIReads {
			if got := read(t, base+c.Path, key, c.Hdr...); got != hot[c.Name] {
				t.Errorf("%s as %s: from the history\n%+v\nfrom the hot streams\n%+v", c.Name, key, got, hot[c.Name])
			}
		}
	}
	for _, c := range testkit.ReadAPIReads {
		if got := read(t, base+c.Path, "other", c.Hdr...); got != unknown {
			t.Errorf("%s as another principal: %+v, want the unknown id's %+v", c.Name, got, unknown)
		}
	}
}

// Only an id whose time can be read is looked up in the History: any
// other unknown id is 404 at once, on every endpoint and for every
// principal, with no lookup (a miss never scans the history).
func TestHistoryOnlyForIDsWithTime(t *testing.T) {
	fh := newFakeHistory()
	_, srv := historyHTTP(t, fh)
	v4 := uuid.NewString()
	for _, id := range []string{"client-chosen-1", v4} {
		for _, key := range []string{"owner", "audit"} {
			for _, p := range []string{"", "/stream", "?wait=true"} {
				if a := read(t, srv.URL+"/v1/requests/"+id+p, key); a.Status != 404 {
					t.Errorf("%s%s as %s: %+v", id, p, key, a)
				}
			}
		}
	}
	if got := fh.lookups(); len(got) != 0 {
		t.Fatalf("the History was asked for %v", got)
	}
	v7 := uuid.Must(uuid.NewV7()).String()
	for _, key := range []string{"owner", "audit"} {
		for _, p := range []string{"", "/stream", "?wait=true"} {
			if a := read(t, srv.URL+"/v1/requests/"+v7+p, key); a.Status != 404 {
				t.Errorf("%s%s as %s: %+v", v7, p, key, a)
			}
		}
	}
	if got := fh.lookups(); len(got) != 6 {
		t.Fatalf("a UUIDv7 unknown to the hot streams was looked up %d times in 6 reads", len(got))
	}
	if _, ok := RequestIDTime(v4); ok {
		t.Error("a UUIDv4 has a time")
	}
	if tm, ok := RequestIDTime(v7); !ok || time.Since(tm) > time.Minute || time.Since(tm) < 0 {
		t.Errorf("RequestIDTime(%s) = %v, %v", v7, tm, ok)
	}
}

// unavailable checks a's body is the E2A error shape with code
// unavailable, retryable, and status 503.
func unavailable(t *testing.T, what string, a testkit.Answer) {
	t.Helper()
	var body APIError
	if err := json.Unmarshal([]byte(a.Body), &body); err != nil || a.Status != http.StatusServiceUnavailable ||
		body.Error.Code != CodeUnavailable || !body.Error.Retryable {
		t.Errorf("%s: %d %s, want 503 unavailable, retryable", what, a.Status, a.Body)
	}
}

// A History that fails, panics or does not answer in time makes the read
// a 503, retryable, in the E2A error shape: never a panic, a hang or a
// 404.
func TestHistoryFailureIsUnavailable(t *testing.T) {
	id := uuid.Must(uuid.NewV7()).String()
	reads := func(t *testing.T, srv *httptest.Server) {
		for _, key := range []string{"owner", "audit"} {
			for _, c := range []struct{ path, accept string }{{"", ""}, {"/stream", ""}, {"/stream", "application/x-ndjson"}, {"?wait=true", ""}} {
				var hdr []string
				if c.accept != "" {
					hdr = []string{"Accept", c.accept}
				}
				unavailable(t, fmt.Sprintf("%s%s %s as %s", id, c.path, c.accept, key), read(t, srv.URL+"/v1/requests/"+id+c.path, key, hdr...))
			}
		}
	}
	t.Run("error", func(t *testing.T) {
		fh := newFakeHistory()
		fh.err = errors.New("E2A_AUDIT: no responders")
		_, srv := historyHTTP(t, fh)
		reads(t, srv)
	})
	t.Run("corrupt archive batch", func(t *testing.T) {
		// Permanent damage: a retryable 503 would have clients retry
		// forever. 500 history_corrupt, not retryable, on every read.
		fh := newFakeHistory()
		fh.err = fmt.Errorf("audit: history corrupt: %w: batch 7", archive.ErrCorrupt)
		_, srv := historyHTTP(t, fh)
		for _, p := range []string{"", "/stream", "?wait=true"} {
			a := read(t, srv.URL+"/v1/requests/"+id+p, "owner")
			var body APIError
			if err := json.Unmarshal([]byte(a.Body), &body); err != nil || a.Status != http.StatusInternalServerError ||
				body.Error.Code != CodeHistoryCorrupt || body.Error.Retryable || strings.Contains(a.Body, "batch 7") {
				t.Errorf("%s: %d %s, want 500 %s, not retryable, the cause not answered", p, a.Status, a.Body, CodeHistoryCorrupt)
			}
		}
	})
	t.Run("panic", func(t *testing.T) {
		fh := newFakeHistory()
		fh.panics = true
		_, srv := historyHTTP(t, fh)
		reads(t, srv)
	})
	t.Run("no testkit.Answer in time", func(t *testing.T) {
		// A History that ignores its context and never answers holds
		// its turn: the read is 503 after the timeout, and so is the
		// next, which gets no turn (one lookup at a time).
		fh := newFakeHistory()
		fh.gate = make(chan struct{})
		defer close(fh.gate)
		_, srv := historyHTTP(t, fh, WithHistoryLimits(1, 100*time.Millisecond))
		unavailable(t, "the first read", read(t, srv.URL+"/v1/requests/"+id, "audit"))
		unavailable(t, "a read while the first lookup holds the only turn", read(t, srv.URL+"/v1/requests/"+id+"/stream", "owner"))
		if got := fh.lookups(); len(got) != 1 {
			t.Errorf("lookups %v, want one (the second got no turn)", got)
		}
	})
}

// At most the lookups WithHistoryLimits allows run at once; the others
// wait for a turn and are answered when they get one.
func TestHistoryLookupsBounded(t *testing.T) {
	fh := newFakeHistory()
	fh.gate = make(chan struct{})
	e, srv := historyHTTP(t, fh, WithHistoryLimits(3, time.Minute))
	id := historicRequest(t, e)
	fh.reqs[id] = storedHistoric(t, e, id)
	natstest.Purge(t, e.js, streams.RequestsStream, streams.ResponsesStream)
	const readers = 8
	codes := make(chan int, readers)
	for i := range readers {
		getAsync(t, srv.URL+"/v1/requests/"+id, []string{"owner", "audit"}[i%2], codes)
	}
	for range 3 {
		testkit.Receive(t, fh.entered, 10*time.Second, "a lookup started")
	}
	close(fh.gate)
	for range readers - 3 {
		testkit.Receive(t, fh.entered, 10*time.Second, "a waiting lookup started")
	}
	for range readers {
		if c := testkit.Receive(t, codes, 10*time.Second, "a read answered"); c != 200 {
			t.Errorf("read answered %d", c)
		}
	}
	if m := fh.most.Load(); m > 3 {
		t.Errorf("%d lookups ran at once, the limit is 3", m)
	}
}

// getAsync sends GET url with key on its own goroutine and sends the
// answer's status to codes (0 when the request failed).
func getAsync(t *testing.T, url, key string, codes chan<- int) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Api-Key", key)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			codes <- 0
			return
		}
		resp.Body.Close()
		codes <- resp.StatusCode
	}()
}

// One principal has at most WithHistoryLookupsPerPrincipal lookups at
// once; its others wait for its own turns and leave the Service's to other
// principals, whose lookups run meanwhile.
func TestHistoryLookupsPerPrincipal(t *testing.T) {
	fh := newFakeHistory()
	fh.gate = make(chan struct{})
	e, s, srv := historyService(t, fh, WithHistoryLimits(8, time.Minute), WithHistoryLookupsPerPrincipal(2))
	id := historicRequest(t, e)
	fh.reqs[id] = storedHistoric(t, e, id)
	natstest.Purge(t, e.js, streams.RequestsStream, streams.ResponsesStream)
	codes := make(chan int, 8)
	get := func(key string) { getAsync(t, srv.URL+"/v1/requests/"+id, key, codes) }
	for range 4 {
		get("owner")
	}
	for range 2 {
		testkit.Receive(t, fh.entered, 10*time.Second, "one of the owner's two lookups started")
	}
	refs := func(user string) int {
		s.userTurns.mu.Lock()
		defer s.userTurns.mu.Unlock()
		if u := s.userTurns.users[user]; u != nil {
			return u.refs
		}
		return 0
	}
	testkit.Eventually(t, 10*time.Second, "the owner's other two lookups waiting for its turns", func() bool { return refs("u_001") == 4 })
	get("other")
	testkit.Receive(t, fh.entered, 10*time.Second, "the other principal's lookup started beside the owner's")
	if n := fh.running.Load(); n != 3 {
		t.Errorf("%d lookups running, want the owner's 2 and the other's", n)
	}
	close(fh.gate)
	for range 2 {
		testkit.Receive(t, fh.entered, 10*time.Second, "a waiting lookup of the owner started")
	}
	got := map[int]int{}
	for range 5 {
		got[testkit.Receive(t, codes, 10*time.Second, "a read answered")]++
	}
	if got[200] != 4 || got[404] != 1 {
		t.Errorf("answers %v, want the owner's 4 reads 200 and the other's 404", got)
	}
	if m := fh.most.Load(); m > 3 {
		t.Errorf("%d lookups ran at once, want at most 3 (2 of the owner's)", m)
	}
	testkit.Eventually(t, 10*time.Second, "the principals' turns dropped", func() bool { return refs("u_001") == 0 && refs("u-2") == 0 })
}

// A request whose history holds no final frame ends as a hot one ends
// when its wait runs out (none will come): its stream with a timeout
// error after its frames, its JSON 202 running (504 with ?wait=true).
func TestHistoryWithoutFinalFrame(t *testing.T) {
	fh := newFakeHistory()
	_, srv := historyHTTP(t, fh)
	id := uuid.Must(uuid.NewV7()).String()
	env, _ := json.Marshal(newEnvelope(id))
	fh.reqs[id] = HistoricRequest{Envelope: env, Frames: []HistoricFrame{{Raw: natstest.Frame(id, 0, false), StreamSeq: 7}}}
	base := srv.URL + "/v1/requests/" + id
	var view RequestView
	a := read(t, base, "owner")
	if err := json.Unmarshal([]byte(a.Body), &view); err != nil || a.Status != http.StatusAccepted || view.State != StateRunning || len(view.Frames) != 1 || view.NextSequence != 1 {
		t.Errorf("json: %+v (%v)", a, err)
	}
	if a := read(t, base+"?wait=true", "owner"); a.Status != http.StatusGatewayTimeout {
		t.Errorf("json wait: %+v", a)
	}
	a = read(t, base+"/stream", "audit")
	evs := readSSE(t, strings.NewReader(a.Body))
	if a.Status != 200 || len(evs) != 3 || evs[1].ID != "0" || evs[2].Event != "error" {
		t.Fatalf("sse: %+v", evs)
	}
	var body APIError
	if err := json.Unmarshal([]byte(evs[2].Data), &body); err != nil || body.Error.Code != CodeTimeout {
		t.Errorf("sse end: %s", evs[2].Data)
	}
	// A gap in the stored sequence is the reader's invalid frame.
	fh.reqs[id] = HistoricRequest{Envelope: env, Frames: []HistoricFrame{{Raw: natstest.Frame(id, 0, false)}, {Raw: natstest.Frame(id, 2, true)}}}
	a = read(t, base+"/stream", "owner", "Accept", "application/x-ndjson")
	lines := strings.Split(strings.TrimSpace(a.Body), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &body); a.Status != 200 || len(lines) != 2 || err != nil || body.Error.Code != CodeInvalidFrame {
		t.Errorf("ndjson with a gap: %+v", a)
	}
}

func TestHistoryOptions(t *testing.T) {
	_, nc := natstest.RunServer(t)
	for name, o := range map[string]Option{
		"nil history":              WithHistory(nil),
		"zero lookups":             WithHistoryLimits(0, time.Second),
		"negative lookups":         WithHistoryLimits(-1, time.Second),
		"zero history timeout":     WithHistoryLimits(1, 0),
		"negative history timeout": WithHistoryLimits(1, -time.Second),
		"zero per principal":       WithHistoryLookupsPerPrincipal(0),
	} {
		if s, err := New(nc, o); !errors.Is(err, ErrInvalidOption) || s != nil {
			t.Errorf("%s: New: %v, want ErrInvalidOption", name, err)
		}
	}
	s, err := New(nc, WithHistory(newFakeHistory()), WithHistoryLimits(2, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if cap(s.historyTurns) != 2 || s.cfg.historyTimeout != time.Second {
		t.Errorf("turns %d, timeout %v", cap(s.historyTurns), s.cfg.historyTimeout)
	}
	if st, code := Classify(fmt.Errorf("%w: x", ErrHistoryUnavailable)); st != 503 || code != CodeUnavailable {
		t.Errorf("Classify(ErrHistoryUnavailable) = %d %s", st, code)
	}
}
