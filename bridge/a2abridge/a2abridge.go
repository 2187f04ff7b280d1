package a2abridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2aext"
	grpcv0 "github.com/a2aproject/a2a-go/v2/a2agrpc/v0"
	grpcv1 "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/a2aproject/a2a-go/v2/errordetails"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/internal/option"
	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
	a2aproto "github.com/e2a-pipeline/pipeline/protocols/a2a"
	"github.com/e2a-pipeline/pipeline/protocols/a2a/a2amap"
)

// Option configures New.
type Option func(*config) error

type config struct {
	pool    string
	convs   *bridge.Conversations
	poll    time.Duration
	log     *slog.Logger
	allowed []allowedHost // WithAllowedHosts
}

// WithConversations keeps the upstream's task and context ids of pool's
// conversations in c, so that continuations reach them (without it, every
// request starts a new upstream task and context).
func WithConversations(pool string, c *bridge.Conversations) Option {
	return option.Check(bridge.ErrInvalidOption, pool != "" && c != nil,
		func(o *config) { o.pool, o.convs = pool, c },
		"conversations need a pool and a store")
}

// WithPollInterval is how often GetTask is polled for an agent that does
// not stream (10 ms..1 min, default 250 ms).
func WithPollInterval(d time.Duration) Option {
	return option.Check(bridge.ErrInvalidOption, d >= 10*time.Millisecond && d <= time.Minute,
		func(o *config) { o.poll = d },
		"poll interval %v (want 10ms..1m)", d)
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return option.NotNil(bridge.ErrInvalidOption, "logger", l, func(o *config) { o.log = l })
}

// Upstream is an A2A agent reached with a2a-go/v2's client. It is safe for
// concurrent use.
type Upstream struct {
	card      *a2a.AgentCard
	client    *a2aclient.Client
	http      *bridge.Client
	origin    origin // where the client may call (origin.go)
	used      string // the interface the client calls, as logs show it
	streaming bool
	cfg       config
}

var (
	_ bridge.Upstream = (*Upstream)(nil)
	_ agent.Resumer   = (*Upstream)(nil)
)

// New reads the agent's card at c's base URL (the card's own URL, or the
// agent's base URL whose /.well-known/agent-card.json is read; at most
// 1 MiB) and builds its client, on one of the card's interfaces on c's
// host or a host allowed (WithAllowedHosts; origin.go). A card that cannot
// be read or names no interface the client speaks and may call is an
// error: the pool does not start.
func New(ctx context.Context, c *bridge.Client, opts ...Option) (*Upstream, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil client", bridge.ErrInvalidOption)
	}
	cfg := config{poll: 250 * time.Millisecond, log: slog.Default()}
	if err := option.Apply(bridge.ErrInvalidOption, &cfg, opts); err != nil {
		return nil, err
	}
	card, err := resolveCard(ctx, c)
	if err != nil {
		return nil, err
	}
	org := originOf(c, cfg.allowed)
	usable, moved, refused := org.split(card)
	if len(usable) == 0 {
		return nil, org.noInterface(c, refused)
	}
	if len(moved) > 0 {
		cfg.log.Info("a2a bridge: the agent's card names the address it listens on; called where its card was read",
			"upstream", c.Location(), "moved", strings.Join(moved, "; "))
	}
	if len(refused) > 0 {
		cfg.log.Warn("a2a bridge: interfaces of the agent's card not used (another host, or http for an https upstream; "+
			"E2A_UPSTREAM_ALLOWED_HOSTS allows a host)", "upstream", c.Location(), "refused", strings.Join(refused, "; "))
	}
	usable, silent := answering(ctx, usable, c.ConnectTimeout())
	if len(silent) > 0 {
		cfg.log.Warn("a2a bridge: interfaces of the agent's card that take no connection are not used (their port not "+
			"exposed, or the agent not listening there); the others are", "upstream", c.Location(), "silent", strings.Join(silent, "; "))
	}
	if h := keyHeader(card); h != "" {
		switch kc, err := c.WithKeyHeader(h); {
		case err != nil:
			cfg.log.Warn("a2a bridge: the agent's card asks for an API key in a header the bridge cannot send; "+
				"the key goes as a bearer token", "upstream", c.Location(), "err", err)
		case kc != c:
			c = kc
			cfg.log.Info("a2a bridge: the agent's card asks for an API key in a header: E2A_UPSTREAM_API_KEY is sent there",
				"upstream", c.Location(), "header", http.CanonicalHeaderKey(h))
		}
	}
	// The client is built from the card with only those interfaces.
	callable := *card
	callable.SupportedInterfaces = usable
	// A non-2xx answer keeps its status (and Retry-After) as the bridge's
	// error: on JSON-RPC every one (A2A's errors come in 200 answers), on
	// HTTP+JSON every one but the binding's JSON error of a 4xx or 5xx
	// other than 429 (a gateway's page, text or JSON of its own, is
	// refused), which a2a-go reads as the agent's own. a2a-go read a 3xx
	// (a redirect, not followed) or a 101 as the agent's server error,
	// upstream_unavailable, and the call was retried.
	rpc := c.HTTPRefusing(func(r *http.Response) bool { return r.StatusCode != http.StatusOK })
	rpc.Transport = eventStreamOfJSON{rpc.Transport}
	rest := c.HTTPRefusing(func(r *http.Response) bool {
		return r.StatusCode/100 != 2 && (r.StatusCode < 400 || r.StatusCode == http.StatusTooManyRequests || !restError(r))
	})
	creds := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if c.Base().Scheme == "https" {
		creds[0] = grpc.WithTransportCredentials(credentials.NewTLS(c.TLSConfig()))
	}
	creds = append(creds, grpcIdle(c.IdleTimeout())...)
	creds = append(creds, grpcRateLimited()...)
	creds = append(creds, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(grpcRecvBound)))
	creds = append(creds, grpcToken(c)...)
	client, err := a2aclient.NewFromCard(ctx, &callable, a2aclient.WithCallInterceptors(a2aext.NewActivator(extensions...), refusedToken{c}),
		a2aclient.WithJSONRPCTransport(rpc), a2aclient.WithRESTTransport(rest), grpcv1.WithGRPCTransport(creds...),
		a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: rpc}),
		a2av0.WithRESTTransport(a2av0.RESTTransportConfig{Client: rest}), grpcv0.WithGRPCTransport(creds...))
	if err != nil {
		return nil, fmt.Errorf("a2abridge: no interface of the card at %s can be used: %w", c.Name(), err)
	}
	u := &Upstream{card: card, client: client, http: c, origin: org, streaming: card.Capabilities.Streaming, cfg: cfg}
	u.used = usedInterface(client, &callable)
	cfg.log.Info("a2a bridge: the agent's interface", "upstream", c.Location(), "interface", u.used)
	return u, nil
}

// usedInterface is the interface of card the client calls, as logs show
// it (scheme and host): a2a-go does not tell, but its UpdateCard takes a
// card only when it lists the client's interface, so each is tried alone
// and the whole card put back.
func usedInterface(client *a2aclient.Client, card *a2a.AgentCard) string {
	used := "(unknown)"
	for _, iface := range card.SupportedInterfaces {
		one := *card
		one.SupportedInterfaces = []*a2a.AgentInterface{iface}
		if client.UpdateCard(&one) == nil {
			used = where(iface) + " (" + string(iface.ProtocolBinding) + ")"
			break
		}
	}
	_ = client.UpdateCard(card)
	return used
}

// extensions are the URIs of the A2A extensions the bridge activates on
// every call it makes to an agent whose card declares them
// (capabilities.extensions; the A2A-Extensions service parameter: an HTTP
// header, X-A2A-Extensions on v0.3, or gRPC metadata), those whose content
// it reads into frames: the trpc interaction spec's (trpc-a2a-version),
// with which an agent such as the pipeline's own A2A door sends thoughts
// (reasoning) and function_call and function_response DataParts (tool
// deltas), which it keeps from clients that do not activate it. An
// extension the card declares and the bridge does not know is not
// requested, and the client's own A2A-Extensions header is not forwarded.
var extensions = []string{a2aproto.InteractionExtension}

// jsonAnswer reports an answer whose body is JSON (application/json or a
// +json type, parameters aside).
func jsonAnswer(r *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// maxRESTError bounds the error body restError reads.
const maxRESTError = 64 << 10

// restError reports an HTTP+JSON error answer that is the agent's A2A
// error: a google.rpc.Status whose details hold an ErrorInfo of A2A's
// domain with a reason, the one thing a2a-go maps to an A2A error. Any
// other JSON (a gateway's or an auth middleware's {"message": …}, a v0.3
// agent's {"message": …}) a2a-go reads as the agent's internal error,
// whatever the status: a 401 would be retried as unavailable. The body
// read is put back for a2a-go.
func restError(r *http.Response) bool {
	if !jsonAnswer(r) {
		return false
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxRESTError))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b), r.Body), r.Body}
	if err != nil {
		return false
	}
	var body struct {
		Error struct {
			Details []struct {
				Type   string `json:"@type"`
				Domain string `json:"domain"`
				Reason string `json:"reason"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &body) != nil {
		return false
	}
	for _, d := range body.Error.Details {
		if d.Type == errordetails.ErrorInfoType && d.Domain == a2a.ProtocolDomain && d.Reason != "" {
			return true
		}
	}
	return false
}

// keyHeader is the header an API key goes in for card: "" (as
// "Authorization: Bearer <key>") when the card asks for no credential, or
// offers a bearer token (HTTP bearer, OAuth 2, OpenID Connect) among its
// options; else the header of the first API key scheme in a header that
// its security requirements name (by name within one; its schemes by
// name when it lists no requirement). A key in a query or a cookie is not
// sent that way: the key goes as a bearer token then.
func keyHeader(card *a2a.AgentCard) string {
	var names []a2a.SecuritySchemeName
	for _, req := range card.SecurityRequirements {
		names = append(names, slices.Sorted(maps.Keys(req))...)
	}
	if len(card.SecurityRequirements) == 0 {
		names = slices.Sorted(maps.Keys(card.SecuritySchemes))
	}
	header := ""
	for _, n := range names {
		switch s := card.SecuritySchemes[n].(type) {
		case a2a.HTTPAuthSecurityScheme:
			if strings.EqualFold(s.Scheme, "bearer") {
				return ""
			}
		case a2a.OAuth2SecurityScheme, a2a.OpenIDConnectSecurityScheme:
			return ""
		case a2a.APIKeySecurityScheme:
			if header == "" && s.Location == a2a.APIKeySecuritySchemeLocationHeader {
				header = strings.TrimSpace(s.Name)
			}
		}
	}
	return header
}

// cardPath is where an agent serves its card (A2A v0.3 and v1.0).
const cardPath = "/.well-known/agent-card.json"

// legacyCardPath is where agents of A2A before v0.3 serve their card (the
// Python SDK's 0.2 releases, and its later ones beside the new path).
const legacyCardPath = "/.well-known/agent.json"

// resolveCard reads the card once and parses it as v1.0 and, when that
// gives no interface, as v0.3. (It was read once per parser: a server that
// hung kept the start waiting for twice the idle timeout.) Given an
// agent's base URL whose /.well-known/agent-card.json is not found (404),
// it reads legacyCardPath, whose error, unless a second 404, is the one
// reported (an agent there that asks for credentials, is down or serves
// what is no card says so, rather than "not found").
func resolveCard(ctx context.Context, c *bridge.Client) (*a2a.AgentCard, error) {
	base := c.Base()
	var path []agentcard.ResolveOption
	if strings.HasSuffix(base.Path, ".json") {
		path = append(path, agentcard.WithPath(base.Path))
		base.Path = ""
	}
	root := (&url.URL{Scheme: base.Scheme, Host: base.Host, Path: base.Path}).String()
	r := &agentcard.Resolver{Client: cardHTTP(c), CardParser: parseEitherCard}
	card, err := r.Resolve(ctx, root, path...)
	var status *agentcard.ErrStatusNotOK
	at := cardPath
	if path == nil && errors.As(err, &status) && status.StatusCode == http.StatusNotFound {
		legacy, lerr := r.Resolve(ctx, root, agentcard.WithPath(legacyCardPath))
		var lstatus *agentcard.ErrStatusNotOK
		if !errors.As(lerr, &lstatus) || lstatus.StatusCode != http.StatusNotFound {
			// Found there, or its error says more than a second 404.
			card, err, at = legacy, lerr, legacyCardPath
		}
	}
	if errors.As(err, &status) {
		msg := "the agent card at " + c.Location() + " answered " + status.Status
		switch {
		case path == nil && status.StatusCode == http.StatusNotFound:
			msg = "no agent card at " + c.Location() + " (" + cardPath + " answered " + status.Status +
				", nor was one at " + legacyCardPath + "): give the URL of the agent, or of its card"
		case path == nil:
			msg = "the agent card at " + c.Location() + " (" + at + ") answered " + status.Status
		}
		e := bridge.StatusError(status.StatusCode, msg)
		e.Err = err
		return nil, fmt.Errorf("a2abridge: %w", e)
	}
	name := c.Name()
	if at == legacyCardPath {
		name += " (" + at + ", " + cardPath + " answered 404)"
	}
	switch {
	case errors.Is(err, errCardTooLarge):
		return nil, fmt.Errorf("a2abridge: agent card of %s: %w", name,
			&bridge.Error{Code: bridge.CodeProtocol, Message: errCardTooLarge.Error(), Err: err})
	case errors.Is(err, errNoInterface):
		err = errNoInterface // its own words, without the resolver's "card parsing failed"
	}
	if err != nil {
		return nil, fmt.Errorf("a2abridge: agent card of %s: %w", name, bridge.Classify(err))
	}
	return card, nil
}

// errNoInterface: the card parses, as v1.0 or v0.3, but names no
// interface.
var errNoInterface = errors.New("the card names no interface")

// parseEitherCard is parseCard of body as cardCompat puts it.
func parseEitherCard(body []byte) (*a2a.AgentCard, error) { return parseCard(cardCompat(body)) }

// parseCard is the card in body as v1.0 when that names an interface,
// else as v0.3 (a2a-go's compat parser) when that does; otherwise the v0.3
// parser's error, or errNoInterface.
func parseCard(body []byte) (*a2a.AgentCard, error) {
	if card, err := agentcard.DefaultCardParser(body); err == nil && len(card.SupportedInterfaces) > 0 {
		return card, nil
	}
	card, err := a2av0.NewAgentCardParser()(body)
	switch {
	case err != nil:
		return nil, err
	case len(card.SupportedInterfaces) == 0:
		return nil, errNoInterface
	}
	return card, nil
}

// Card is the agent's card as read at start.
func (u *Upstream) Card() *a2a.AgentCard { return u.card }

// ReadCard reads the agent's card again, as New read it, for a pool card
// that follows the agent's (its name, description, skills, modes). The
// client keeps the interface New chose, whatever the card names now: one
// that names interfaces the bridge may not call (another host, http for
// an https upstream; origin.go) is logged as a warning, and never
// switched to.
func (u *Upstream) ReadCard(ctx context.Context) (*a2a.AgentCard, error) {
	card, err := resolveCard(ctx, u.http)
	if err != nil {
		return nil, err
	}
	if _, _, refused := u.origin.split(card); len(refused) > 0 {
		u.cfg.log.Warn("a2a bridge: the agent's card read again names interfaces the bridge does not call; "+
			"the client stays on its interface", "upstream", u.http.Location(), "interface", u.used,
			"refused", strings.Join(refused, "; "))
	}
	return card, nil
}

// Name is "a2a" and the agent's scheme and host.
func (u *Upstream) Name() string { return "a2a " + u.http.Name() }

// Scrub takes the client's credentials out of s (bridge.Scrubber): an
// agent's error may quote the request's headers.
func (u *Upstream) Scrub(s string) string { return u.http.Scrub(s) }

// Resumable: a request another worker started is resumed by subscribing
// to the upstream task.
func (u *Upstream) Resumable() bool { return true }

// Close releases the client's transports.
func (u *Upstream) Close() error { return u.client.Destroy() }

// Call sends env's text, files and data to the agent as a user message
// and writes its answer as frames.
func (u *Upstream) Call(ctx context.Context, env *e2a.Envelope, w agent.Writer) error {
	conv, _, err := u.conversation(ctx, env)
	if err != nil {
		return err
	}
	ctx = u.serviceParams(ctx, env)
	// A new task of the conversation goes to its upstream context; a turn
	// of a task the conversation knows (env's thread), to that task's.
	t := &turn{u: u, env: env, w: w, contextID: conv.UpstreamContextID}
	var th bridge.Thread
	if p := conv.Thread(env); p != nil {
		th = *p
		if th.UpstreamContextID != "" {
			t.contextID = th.UpstreamContextID
		}
	}
	// The task is this request's when the request recorded it (the
	// thread's Tasks, whichever of its last turns it is: requests of one
	// E2A session may run at once): a takeover, or a call retried (or
	// redelivered) after the agent made the task but before any frame,
	// follows that task instead of starting another.
	task, mine := th.TaskOf(env.RequestID)
	if mine {
		// The record already holds this request and its task: it is not
		// written again.
		t.taskID, t.recorded = a2a.TaskID(task), task != ""
	}
	if w.ResumeAfter() >= 0 || (mine && t.taskID != "") {
		base, _ := th.BaselineOf(env.RequestID)
		return t.resume(ctx, earlierTurns(&th, env.RequestID, t.taskID), base)
	}
	parts := userParts(env)
	if len(parts) == 0 {
		return agent.Errorf(e2a.ErrCodeInvalidRequest, false, "the request has no text, file or data for the A2A agent")
	}
	msg := &a2a.Message{ID: u.messageID(env), Role: a2a.MessageRoleUser, Parts: parts, ContextID: t.contextID}
	// The client's message metadata and extensions, as it sent them (the
	// agent behind the bridge unchanged); its reference tasks name the
	// pipeline's tasks, which the agent does not know.
	msg.Metadata, msg.Extensions = env.A2AMetadata, a2amap.Extensions(env)
	open, err := u.interrupted(ctx, env, conv)
	if err != nil {
		return err
	}
	if open {
		t.taskID = a2a.TaskID(th.UpstreamTaskID)
		msg.TaskID = t.taskID
		// The task holds its earlier turns' artifacts, which the task
		// snapshots of this turn (some agents' first event, GetTask)
		// hold too: only what it gets beyond them is this turn's answer.
		task, err := u.client.GetTask(ctx, &a2a.GetTaskRequest{ID: t.taskID})
		if err != nil {
			return upstreamError(err)
		}
		t.base(task)
		if st := task.Status.State; st == a2a.TaskStateInputRequired || st == a2a.TaskStateAuthRequired {
			t.asked = &task.Status
		}
		// Recorded with the request's upstream task (record): a worker
		// taking the turn over starts from it too.
		t.baseline = t.baselineOf(task, t.asked)
	}
	req := &a2a.SendMessageRequest{Message: msg}
	defer t.forwardCancel(ctx)
	if u.streaming {
		return t.unanswered(t.follow(ctx, t.stream(ctx, req)))
	}
	// Without a stream, the task is asked for at once and polled: its
	// progress reaches the client while it works, and a cancel finds it.
	req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	return t.unanswered(t.sendAndPoll(ctx, req))
}

// unanswered is err, the end of the call that sent the turn's message,
// marked bridge.ErrSentUnanswered when the idle timeout ran out before the
// agent's first event (no task named): the agent may be working on the
// message (the Python and Java SDKs send a stream's headers with its
// first event, and answer SendMessage once it is there), so it is not sent
// again, which would start another task each time.
func (t *turn) unanswered(err error) error {
	var be *bridge.Error
	if t.answered || !errors.Is(err, bridge.ErrAwaitingAnswer) || !errors.As(err, &be) {
		return err
	}
	e := *be
	e.Message += " before its first event: the agent may be working on the message, which is not sent again " +
		"(an agent silent for longer before it says anything needs a longer E2A_UPSTREAM_IDLE_TIMEOUT)"
	e.Err = fmt.Errorf("%w: %w", bridge.ErrSentUnanswered, be)
	return &e
}

// messageID is the messageId of the message a call for env sends: a
// name-based UUID (version 5) of the pool and the request's id, so that
// every attempt of the request (a retry before any frame, a redelivery to
// another worker) sends the message under the same id, which an agent or
// a gateway can dedupe by, and another request (each turn is one) under
// another.
func (u *Upstream) messageID(env *e2a.Envelope) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("e2a:a2a-message:"+u.cfg.pool+"/"+env.RequestID)).String()
}

// serviceParams attaches the credentials and the request's trace context
// to every call made with ctx, as A2A service parameters: HTTP headers on
// JSON-RPC and HTTP+JSON (where the HTTP client sets them too), gRPC
// metadata on gRPC.
func (u *Upstream) serviceParams(ctx context.Context, env *e2a.Envelope) context.Context {
	h := http.Header{}
	u.http.SetHeaders(ctx, h, env)
	sp := a2aclient.ServiceParams{}
	for k, v := range h {
		sp.Append(k, v...)
	}
	return a2aclient.AttachServiceParams(ctx, sp)
}

// conversation returns env's conversation (the zero one without a store).
func (u *Upstream) conversation(ctx context.Context, env *e2a.Envelope) (bridge.Conversation, bool, error) {
	if u.cfg.convs == nil {
		return bridge.Conversation{}, false, nil
	}
	c, found, err := u.cfg.convs.Get(ctx, u.cfg.pool, env)
	if err != nil {
		return c, false, &bridge.Error{Code: "history_unavailable", Retryable: true, Message: err.Error(), Err: err}
	}
	return c, found, nil
}

// interrupted reports whether the upstream task of env's thread of conv
// waits for env's message (its last turn ended input-required or
// auth-required).
func (u *Upstream) interrupted(ctx context.Context, env *e2a.Envelope, conv bridge.Conversation) (bool, error) {
	if u.cfg.convs == nil {
		return false, nil
	}
	open, err := u.cfg.convs.Interrupted(ctx, env, conv)
	if err != nil {
		return false, &bridge.Error{Code: "history_unavailable", Retryable: true, Message: err.Error(), Err: err}
	}
	return open, nil
}

// sendAndPoll sends the message and polls the task until it ends or is
// interrupted. The answer is waited for on a context the request's end
// does not close (send): a request cancelled before it came still has the
// task it names cancelled.
func (t *turn) sendAndPoll(ctx context.Context, req *a2a.SendMessageRequest) error {
	res, err := t.send(ctx, req)
	if err != nil {
		return upstreamError(err)
	}
	if err := t.event(ctx, res); err != nil || t.done {
		return err
	}
	return t.pollTask(ctx, 0)
}

// pollTask polls the task until it ends or is interrupted. A poll that
// fails as a stream is cut (cutCodes: the connection, a timeout, an
// overloaded or failing agent) is not the end of the task, which runs
// on: after frames were written the Handler cannot run the call again,
// so the poll is tried again here, after a wait (resubscribeWait, the
// agent's Retry-After honoured up to its cap), up to resubscribes times
// in a row. With idle > 0 (a streaming agent's task polled because it
// could not be subscribed to after a cut: followTask, stallIdleTimeouts),
// a task that makes no progress (no new event, state or artifact: reach
// and the state stay) for idle ends the turn upstream_cannot_resume, retryable (the
// task may run on; the bridge cannot follow it): the polls, every
// cfg.poll, had no bound but the request's end.
func (t *turn) pollTask(ctx context.Context, idle time.Duration) error {
	tick := time.NewTicker(t.u.cfg.poll)
	defer tick.Stop()
	last, reach, state, polls := time.Now(), t.reach(), a2a.TaskState(""), 0
	for failed := 0; !t.done; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		task, err := t.u.client.GetTask(ctx, &a2a.GetTaskRequest{ID: t.taskID})
		if err != nil {
			err = upstreamError(err)
			be, cut := cutError(err)
			if !cut || ctx.Err() != nil || failed == resubscribes {
				return err
			}
			wait := resubscribeWait(failed, be.RetryAfter)
			failed++
			t.u.cfg.log.Info("a2a bridge: a poll of the agent's task failed; polling on", "request_id", t.env.RequestID,
				"task", t.taskID, "code", be.Code, "attempt", failed, "wait", wait, "err", t.u.Scrub(be.Message))
			if serr := sleepctx.Sleep(ctx, wait); serr != nil {
				return serr
			}
			continue
		}
		failed, polls = 0, polls+1
		if err := t.event(ctx, task); err != nil {
			return err
		}
		if r := t.reach(); r != reach || task.Status.State != state {
			last, reach, state = time.Now(), r, task.Status.State
		} else if idle > 0 && !t.done && time.Since(last) >= idle {
			t.u.cfg.log.Info("a2a bridge: the agent's task made no progress while polled; ending the request", "request_id", t.env.RequestID,
				"task", t.taskID, "idle", idle, "polls", polls)
			return &bridge.Error{Code: bridge.CodeCannotResume, Retryable: true, Message: fmt.Sprintf(
				"the agent's task made no progress for %v after its stream was cut (it could not be subscribed to; polled %d times)", idle, polls)}
		}
	}
	return nil
}

// follow writes the events of a stream until the turn ends; a stream cut
// once the task is known is followed on by subscribing to the task
// (resubscribe.go).
func (t *turn) follow(ctx context.Context, events func(func(a2a.Event, error) bool)) error {
	return t.resubscribing(ctx, t.followStream(ctx, events))
}

// followStream writes the events of one stream until the turn ends.
func (t *turn) followStream(ctx context.Context, events func(func(a2a.Event, error) bool)) error {
	for ev, err := range events {
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return upstreamError(err)
		}
		if err := t.event(ctx, ev); err != nil {
			return err
		}
		if t.done {
			return nil
		}
	}
	if !t.done {
		return &bridge.Error{Code: bridge.CodeUnavailable, Retryable: true,
			Message: "the agent's stream ended before the task ended or asked for input"}
	}
	return nil
}

// forwardCancel tells the agent when the request ended for good (it was
// cancelled or passed its deadline) while its task runs: CancelTask
// (cancelforward.go; a task the agent had not named yet is cancelled by
// the stream, turn.stream, or by the wait for SendMessage's answer,
// turn.send). A request handed back or fenced is not: its
// next worker resumes the task.
func (t *turn) forwardCancel(ctx context.Context) {
	if t.done || t.taskID == "" || !forwarded(ctx) {
		return
	}
	t.cancelTask(ctx, t.taskID)
}

// upstreamError maps an a2a-go client error: the SDK's transport errors
// as bridge.Classify reads them; an A2A error the agent answered is its
// refusal.
func upstreamError(err error) error {
	var be *bridge.Error
	if errors.As(err, &be) || errors.Is(err, context.Canceled) {
		return err
	}
	if errors.Is(err, a2a.ErrUnauthenticated) || errors.Is(err, a2a.ErrUnauthorized) {
		return &bridge.Error{Code: bridge.CodeAuth, Message: "the agent refused the bridge's credentials: " + err.Error(), Err: err}
	}
	for _, refusal := range []error{a2a.ErrTaskNotFound, a2a.ErrTaskNotCancelable, a2a.ErrUnsupportedOperation,
		a2a.ErrInvalidParams, a2a.ErrInvalidRequest, a2a.ErrUnsupportedContentType, a2a.ErrMethodNotFound,
		a2a.ErrVersionNotSupported, a2a.ErrExtensionSupportRequired} {
		if errors.Is(err, refusal) {
			return &bridge.Error{Code: bridge.CodeRejected, Message: "the agent refused: " + err.Error(), Err: err}
		}
	}
	if errors.Is(err, a2a.ErrInvalidAgentResponse) || errors.Is(err, a2a.ErrParseError) {
		return &bridge.Error{Code: bridge.CodeProtocol, Message: "the agent's answer is not A2A: " + err.Error(), Err: err}
	}
	c := bridge.Classify(err)
	if errors.As(c, &be) && be.Code == bridge.CodeProtocol && (errors.Is(err, a2a.ErrInternalError) || errors.Is(err, a2a.ErrServerError)) {
		// The agent's own failure (JSON-RPC -32603 or -32000; a2a-go
		// reads gRPC's Internal and Unavailable so too), as an HTTP 5xx:
		// retried while nothing is written. a2a-go/v2's server answers so
		// a message continuing a task whose execution, having reported
		// input-required, has not returned yet ("task execution is
		// already in progress").
		return &bridge.Error{Code: bridge.CodeUnavailable, Retryable: true, Message: "the agent failed: " + err.Error(), Err: err}
	}
	return c
}

// terminal reports a state the task does not leave.
func terminal(s a2a.TaskState) bool {
	return slices.Contains([]a2a.TaskState{a2a.TaskStateCompleted, a2a.TaskStateFailed, a2a.TaskStateCanceled,
		a2a.TaskStateRejected}, s)
}
