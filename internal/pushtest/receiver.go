package pushtest

import (
	"cmp"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/e2a-pipeline/pipeline/internal/testkit"
	"github.com/e2a-pipeline/pipeline/push"
)

// Delivery is one POST a Receiver got, its body decoded.
type Delivery struct {
	Path string
	// Remote is the sender's address (host:port of its connection).
	Remote string
	// Token is the notification token of either generation's header.
	Token, Auth, EventID, Signature string
	// ContentType is the POST's Content-Type header.
	ContentType string
	Body        []byte
	// TaskID, Kind and State come from the body: Kind is "status" or
	// "artifact" for an A2A v1.0 StreamResponse update or an A2A v0.3
	// event, "task" for a Task (v1.0 StreamResponse task, or a v0.3 Task
	// as the v0.3 SDKs post it), "message", or "unknown"; State is the
	// status update's or the task's state.
	TaskID, Kind, State string
}

// Receiver is a webhook on loopback recording every POST in arrival
// order (answered 200, or as Answer says).
type Receiver struct {
	// URL is the server's base URL.
	URL  string
	mu   sync.Mutex
	got  []Delivery
	hold *hold
	// codes are the statuses Answer set, by path.
	codes map[string]int
}

// hold is a POST a Receiver is to hold (Hold).
type hold struct {
	path    string
	taken   bool
	held    chan Delivery
	release chan struct{}
}

// NewReceiver starts a Receiver, closed with the test.
func NewReceiver(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		d := Decode(body)
		d.Path, d.Body = req.URL.Path, body
		d.Token = cmp.Or(req.Header.Get(push.HeaderTokenV1), req.Header.Get(push.HeaderTokenV03))
		d.Auth, d.EventID = req.Header.Get("Authorization"), req.Header.Get(push.HeaderEventID)
		d.Signature = req.Header.Get(push.HeaderSignature)
		d.ContentType = req.Header.Get("Content-Type")
		d.Remote = req.RemoteAddr
		r.mu.Lock()
		if h := r.hold; h != nil && !h.taken && h.path == d.Path {
			h.taken = true
			r.mu.Unlock()
			h.held <- d
			<-h.release
			r.mu.Lock()
		}
		r.got = append(r.got, d)
		code, ok := r.codes[d.Path]
		r.mu.Unlock()
		if ok {
			w.WriteHeader(code)
		}
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// Hold makes the next POST to path wait, before it is recorded, until
// release is called (or the test ends); held gets that POST when it
// arrives. Release records it then, as a receiver that processed it
// would, whether or not its sender is still there to get the answer.
func (r *Receiver) Hold(t testing.TB, path string) (held <-chan Delivery, release func()) {
	h := &hold{path: path, held: make(chan Delivery, 1), release: make(chan struct{})}
	r.mu.Lock()
	r.hold = h
	r.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { close(h.release) }) }
	t.Cleanup(release)
	return h.held, release
}

// Answer makes the Receiver answer every later POST to path with status
// code (recorded all the same).
func (r *Receiver) Answer(path string, code int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.codes == nil {
		r.codes = map[string]int{}
	}
	r.codes[path] = code
}

// All returns every delivery so far.
func (r *Receiver) All() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delivery(nil), r.got...)
}

// Of returns the deliveries to path.
func (r *Receiver) Of(path string) []Delivery {
	var out []Delivery
	for _, d := range r.All() {
		if d.Path == path {
			out = append(out, d)
		}
	}
	return out
}

type status struct {
	State string `json:"state"`
}

// body is every shape a delivery may have, decoded at once.
type body struct {
	// A2A v1.0 StreamResponse
	StatusUpdate *struct {
		TaskID string `json:"taskId"`
		Status status `json:"status"`
	} `json:"statusUpdate"`
	ArtifactUpdate *struct {
		TaskID string `json:"taskId"`
	} `json:"artifactUpdate"`
	Task *struct {
		ID     string `json:"id"`
		Status status `json:"status"`
	} `json:"task"`
	Message *struct {
		TaskID string `json:"taskId"`
	} `json:"message"`
	// A2A v0.3: an event or a Task (kind)
	Kind   string `json:"kind"`
	ID     string `json:"id"`
	TaskID string `json:"taskId"`
	Status status `json:"status"`
}

// Decode reads a delivery's body (TaskID, Kind and State only).
func Decode(b []byte) Delivery {
	var v body
	if json.Unmarshal(b, &v) != nil {
		return Delivery{Kind: "unknown"}
	}
	switch {
	case v.StatusUpdate != nil:
		return Delivery{TaskID: v.StatusUpdate.TaskID, Kind: "status", State: v.StatusUpdate.Status.State}
	case v.ArtifactUpdate != nil:
		return Delivery{TaskID: v.ArtifactUpdate.TaskID, Kind: "artifact"}
	case v.Task != nil:
		return Delivery{TaskID: v.Task.ID, Kind: "task", State: v.Task.Status.State}
	case v.Message != nil:
		return Delivery{TaskID: v.Message.TaskID, Kind: "message"}
	case v.Kind == "status-update":
		return Delivery{TaskID: v.TaskID, Kind: "status", State: v.Status.State}
	case v.Kind == "artifact-update":
		return Delivery{TaskID: v.TaskID, Kind: "artifact"}
	case v.Kind == "task":
		return Delivery{TaskID: v.ID, Kind: "task", State: v.Status.State}
	}
	return Delivery{Kind: "unknown"}
}

// Await waits up to d until the last delivery to path is in state (its
// status update's or task's) and returns the deliveries to path.
func (r *Receiver) Await(t testing.TB, d time.Duration, path, state string) []Delivery {
	t.Helper()
	testkit.Eventually(t, d, "a delivery in state "+state+" last at "+path, func() bool {
		ds := r.Of(path)
		return len(ds) > 0 && ds[len(ds)-1].State == state
	})
	return r.Of(path)
}
