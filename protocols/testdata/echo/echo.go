package echo

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/egress"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/render"
)

// Name, Path and Format of the protocol.
const (
	Name   = "echo"
	Path   = "/echo"
	Format = "echo_ndjson"
)

// Protocol is the protocol's registry entry: the one line a registry adds.
var Protocol = protocols.Protocol{Name: Name, Title: "Echo", Version: "1", Adapter: Name,
	Paths: []string{Path}, Formats: []string{Format}, Service: Service{}}

// Service serves the protocol: its front door (host.RouteServer) and its
// adapter (protocols.Adapting).
type Service struct{}

var (
	_ host.RouteServer   = Service{}
	_ protocols.Adapting = Service{}
)

// Request is the body of POST /echo.
type Request struct {
	Text string `json:"text"`
}

// Routes is the front door: POST /echo.
func (Service) Routes(h host.Host) []host.Route {
	return []host.Route{{Method: http.MethodPost, Path: Path, Handler: frontDoor{h}}}
}

// Normalize is the protocol's adapter: the request as an E2A envelope
// (method "echo", the text in params), decoded by the normalizer's E2A
// adapter, which applies the routing rule, the caller and the ids.
func (Service) Normalize(n *normalizer.Normalizer, in normalizer.Input) (*normalizer.Result, error) {
	var req Request
	if err := json.Unmarshal(in.Body, &req); err != nil {
		return nil, err
	}
	if req.Text == "" {
		return nil, errors.New("echo: text is empty")
	}
	body, err := json.Marshal(e2a.Envelope{Method: "echo", IsStream: true, Params: map[string]any{"text": req.Text}})
	if err != nil {
		return nil, err
	}
	in.Body = body
	return n.FromE2A(in)
}

// Error is the protocol's error body.
type Error struct {
	Error string `json:"error"`
}

func refuse(w http.ResponseWriter, f host.Refusal) { writeError(w, f.Status, f.Message) }

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(Error{Error: msg})
}

type frontDoor struct{ h host.Host }

func (d frontDoor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, ok := d.h.Admit(w, r, Name, refuse)
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, d.h.MaxBody()))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, err.Error())
		return
	}
	res, err := Service{}.Normalize(d.h.Normalizer(), c.Input(r, body, r.URL.Query().Get("agent")))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	sub, err := c.Submit(r.Context(), host.Submission{Pool: res.Pool, Envelope: res.Envelope})
	if err != nil {
		st, _ := egress.Classify(err)
		writeError(w, st, err.Error())
		return
	}
	defer sub.Done()
	d.h.Serve(w, r, sub.RequestID, Format, NewRenderer)
}

// Line is one line of the answer.
type Line struct {
	Text   string `json:"text,omitempty"`
	Kind   string `json:"kind,omitempty"`
	Done   bool   `json:"done,omitempty"`
	Status string `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
}

// NewRenderer is the protocol's renderer: one NDJSON line per frame.
func NewRenderer(o *render.Output) render.Renderer { return &renderer{o: o} }

type renderer struct{ o *render.Output }

var _ render.Renderer = (*renderer)(nil)

func (r *renderer) Start() error { render.NDJSONHead(r.o); return nil }

func (r *renderer) Frame(f *render.Frame) error {
	if c, ok := render.ReadTextChunk(f); ok {
		return render.WriteLineJSON(r.o, Line{Text: c.Text})
	}
	resp, err := f.Decoded()
	if err != nil {
		return err
	}
	if resp.IsFinal {
		return render.WriteLineJSON(r.o, Line{Done: true, Status: resp.Status})
	}
	return render.WriteLineJSON(r.o, Line{Kind: resp.ResponseKind})
}

func (r *renderer) Heartbeat() error { return nil }

func (r *renderer) End(err error) error {
	if err == nil {
		return nil
	}
	if !r.o.Started() {
		st, _ := egress.Classify(err)
		return r.o.WriteJSON(st, Error{Error: err.Error()})
	}
	return render.WriteLineJSON(r.o, Line{Error: err.Error()})
}
