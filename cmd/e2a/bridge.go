package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/e2a-pipeline/pipeline/agent"
	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/openai"
	"github.com/e2a-pipeline/pipeline/internal/sleepctx"
)

// Upstream kinds of `e2a agent --a2a|--openai|--http`.
const (
	upstreamA2A    = "a2a"
	upstreamOpenAI = "openai"
	upstreamHTTP   = "http"
)

// errNoUpstream: the agent command names no upstream (a built-in pool).
var errNoUpstream = errors.New("no upstream")

// bridgeFlags are the flags of `e2a agent` that name an upstream; each
// wins over its E2A_UPSTREAM_* variable.
type bridgeFlags struct {
	a2a, openai, http, model, system, inputModes string
	thinkOpen                                    bool
}

// register adds the flags to fs (`e2a agent`'s).
func (f *bridgeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.a2a, "a2a", "", "bridge an A2A agent: the URL its agent card is served at (or its base URL)")
	fs.StringVar(&f.openai, "openai", "", "bridge an OpenAI-compatible chat completions server: its base URL (http://localhost:8000/v1)")
	fs.StringVar(&f.http, "http", "", "bridge an HTTP agent: the URL the E2A envelope is POSTed to")
	fs.StringVar(&f.model, "model", "", "with --openai: the model")
	fs.StringVar(&f.system, "system", "", "with --openai: the system prompt")
	fs.BoolVar(&f.thinkOpen, "think-open", false, "with --openai: the model's chat template opens <think> in the prompt (DeepSeek-R1's distilled models, Qwen3's Thinking-2507) "+
		"and the server does not separate reasoning: its content is reasoning until </think>, then the answer (E2A_UPSTREAM_THINK_OPEN)")
	fs.StringVar(&f.inputModes, "input-modes", "", "media types the pool takes in an A2A file part, listed on its card: a comma list (text/plain,image/png; image/* allowed); "+
		"default E2A_UPSTREAM_INPUT_MODES, else an --a2a agent's own card's, else text/plain,application/json; given, it wins over the --a2a agent's card")
}

// upstream returns the configured upstream: the flags over cfg.Upstream.
// errNoUpstream when neither names one; an error when they name two.
func (f bridgeFlags) upstream(cfg UpstreamConfig) (UpstreamConfig, error) {
	u := cfg
	set := 0
	for _, kv := range []struct{ kind, url string }{{upstreamA2A, f.a2a}, {upstreamOpenAI, f.openai}, {upstreamHTTP, f.http}} {
		if kv.url != "" {
			u.Kind, u.URL = kv.kind, kv.url
			set++
		}
	}
	if set > 1 {
		return u, errors.New("give one of --a2a, --openai and --http")
	}
	if f.model != "" {
		u.Model = f.model
	}
	if f.system != "" {
		u.System = f.system
	}
	if f.thinkOpen {
		u.ThinkOpen = true
	}
	if f.inputModes != "" {
		if _, err := parseInputModes(f.inputModes); err != nil {
			return u, fmt.Errorf("--input-modes: %w", err)
		}
		u.InputModes = f.inputModes
	}
	if u.Kind == "" && u.URL == "" {
		return u, errNoUpstream
	}
	switch u.Kind {
	case upstreamA2A, upstreamOpenAI, upstreamHTTP:
	default:
		return u, fmt.Errorf("E2A_UPSTREAM_KIND %q: want a2a, openai or http", u.Kind)
	}
	if u.URL == "" {
		return u, fmt.Errorf("the %s upstream needs a URL (--%s URL or E2A_UPSTREAM_URL)", u.Kind, u.Kind)
	}
	if u.Kind == upstreamOpenAI && u.Model == "" {
		return u, errors.New("the openai upstream needs a model (--model or E2A_UPSTREAM_MODEL)")
	}
	if u.ThinkOpen && u.Kind != upstreamOpenAI {
		return u, fmt.Errorf("--think-open (E2A_UPSTREAM_THINK_OPEN) is for the openai upstream, not %s", u.Kind)
	}
	// A --model or --system typed for another upstream would be dropped
	// without a word (an A2A or HTTP agent picks its own model and prompt).
	for _, fl := range []struct{ name, val string }{{"model", f.model}, {"system", f.system}} {
		if fl.val != "" && u.Kind != upstreamOpenAI {
			return u, fmt.Errorf("--%s is for the openai upstream, not %s (an A2A or HTTP agent picks its own)", fl.name, u.Kind)
		}
	}
	return u, nil
}

// namedOption returns option o of a bridge setting whose refusal names
// vars, the variables it is set from, before the bridge's explanation
// ("E2A_UPSTREAM_CONNECT_TIMEOUT: bridge: invalid option: connect timeout
// -1s must be > 0"): the operator must know which E2A_UPSTREAM_* to fix.
func namedOption[C any, O ~func(*C) error](vars string, o O) O {
	return func(c *C) error {
		if err := o(c); err != nil {
			return fmt.Errorf("%s: %w", vars, err)
		}
		return nil
	}
}

// upstreamClient is the client of upstream u: its timeouts, credentials
// (headers: E2A_UPSTREAM_HEADERS parsed) and TLS; a refused setting names
// its variables.
func upstreamClient(u UpstreamConfig, headers map[string]string) (*bridge.Client, error) {
	opts := []bridge.ClientOption{namedOption("E2A_UPSTREAM_CONNECT_TIMEOUT", bridge.WithConnectTimeout(u.ConnectTimeout)),
		namedOption("E2A_UPSTREAM_IDLE_TIMEOUT", bridge.WithIdleTimeout(u.IdleTimeout)),
		namedOption("E2A_UPSTREAM_MAX_ANSWER_BYTES", bridge.WithMaxBodyBytes(u.MaxAnswerBytes)),
		bridge.WithCredentials(bridge.Credentials{APIKey: u.APIKey, Headers: headers})}
	tlsCfg, err := u.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil {
		opts = append(opts, bridge.WithTLSConfig(tlsCfg))
	}
	switch o, err := u.tokenOption(headers); {
	case err != nil:
		return nil, err
	case o != nil:
		opts = append(opts, o)
	}
	return bridge.NewClient(u.URL, opts...)
}

// newBridge builds the handler of pool for upstream u: its client, its
// conversations store and pool card (E2A_BRIDGE), and the bridge around
// it. An unreachable A2A card fails here, before the pool starts.
func newBridge(ctx context.Context, js jetstream.JetStream, cfg Config, pool string, u UpstreamConfig, reg prometheus.Registerer, log *slog.Logger) (agent.Handler, error) {
	headers, err := u.headers()
	if err != nil {
		return nil, err
	}
	inputModes, err := parseInputModes(u.InputModes)
	if err != nil {
		return nil, fmt.Errorf("E2A_UPSTREAM_INPUT_MODES: %w", err)
	}
	params, err := upstreamParams(u)
	if err != nil {
		return nil, err
	}
	// The bridge's settings are checked before the upstream is called or
	// the pool's card published; a refused one names its variables.
	opts := []bridge.Option{namedOption("E2A_UPSTREAM_MAX_IN_FLIGHT", bridge.WithMaxInFlight(u.MaxInFlight)),
		namedOption("E2A_UPSTREAM_RETRIES, E2A_UPSTREAM_RETRY_BASE, E2A_UPSTREAM_RETRY_MAX", bridge.WithRetry(u.Retries, u.RetryBase, u.RetryMax)),
		namedOption("E2A_UPSTREAM_MAX_ANSWER_BYTES", bridge.WithMaxAnswerBytes(u.MaxAnswerBytes)),
		bridge.WithMetrics(reg), bridge.WithLogger(log)}
	if err := bridge.CheckOptions(opts...); err != nil {
		return nil, err
	}
	if u, err = tokenFromCard(ctx, u, headers, log); err != nil {
		return nil, err
	}
	client, err := upstreamClient(u, headers)
	if err != nil {
		return nil, err
	}
	// Said before the check: an upstream that takes the connection and
	// never answers holds the start for the connect and idle timeouts.
	log.Info("checking the upstream", "pool", pool, "kind", u.Kind, "url", client.Location(), "within", (u.ConnectTimeout + u.IdleTimeout).String())
	if err := probeUpstream(ctx, client, u, headers, log); err != nil {
		return nil, err
	}
	conv, err := bridge.OpenConversations(ctx, js, cfg.StreamsConfig())
	if err != nil {
		return nil, err
	}
	info := bridge.PoolInfo{Pool: pool, Kind: u.Kind, Upstream: client.Name(), Name: u.Name, Description: u.Description, Streaming: true,
		InputModes: inputModes}
	configured := info
	var up bridge.Upstream
	var readCard cardReader
	switch u.Kind {
	case upstreamOpenAI:
		if up, err = newOpenAI(client, conv, pool, u, params, &info, log); err != nil {
			return nil, err
		}
	default:
		up, readCard, err = newUpstream(ctx, client, conv, pool, u, &info, log)
		if refused := refusedAtStart(err, u, client.Location(), "the agent card's GET", headers); refused != nil {
			return nil, refused
		}
		if err != nil {
			return nil, err
		}
	}
	if info.Name == "" {
		info.Name = pool
	}
	if err := conv.PublishPool(ctx, info); err != nil {
		return nil, err
	}
	keep := poolCard{conv: conv, info: info, ttl: cfg.TasksTTL, log: log}
	if readCard != nil && u.CardRefresh > 0 {
		keep.refresh, keep.every = func(ctx context.Context) (bridge.PoolInfo, error) {
			card, err := readCard(ctx)
			if err != nil {
				return bridge.PoolInfo{}, err
			}
			n := configured
			describeA2A(&n, card)
			n.Name = cmp.Or(n.Name, pool)
			return n, nil
		}, u.CardRefresh
	}
	go keep.run(ctx)
	// credentials_used, not credentials: the log's redaction replaces a
	// secret-named key's value, and this one names the credentials (api
	// key, header names, or none), never their values.
	used := bridge.Credentials{APIKey: u.APIKey, Headers: headers}.String()
	if client.HasTokenSource() {
		used = strings.TrimPrefix(used+", oauth2 client credentials", "none, ")
	}
	log.Info("bridge", "pool", pool, "upstream", up.Name(), "url", client.Location(), "credentials_used", used)
	return bridge.New(pool, up, opts...)
}

// newOpenAI is the upstream of an --openai pool: the model u.Model of
// client, multi-turn from the pool's conversations (conv), with u's
// system prompt and params; info gets its description unless configured.
func newOpenAI(client *bridge.Client, conv *bridge.Conversations, pool string, u UpstreamConfig, params map[string]any, info *bridge.PoolInfo, log *slog.Logger) (bridge.Upstream, error) {
	opts := []openai.Option{openai.WithHistory(pool, conv), openai.WithLogger(log)}
	if u.System != "" {
		opts = append(opts, openai.WithSystem(u.System))
	}
	if params != nil {
		opts = append(opts, openai.WithParams(params))
	}
	if u.ThinkOpen {
		opts = append(opts, openai.WithThinkOpen())
	}
	if info.Description == "" {
		info.Description = "The model " + u.Model + " behind the E2A Pipeline: multi-turn from the pipeline's durable history."
	}
	return openai.New(client, u.Model, opts...)
}

// upstreamParams reads E2A_UPSTREAM_PARAMS, the request members an
// --openai pool sends with every call (nil when unset), refused by the
// variable's name before the upstream is called; other kinds have no such
// members.
func upstreamParams(u UpstreamConfig) (map[string]any, error) {
	if strings.TrimSpace(u.Params) == "" {
		return nil, nil
	}
	if u.Kind != upstreamOpenAI {
		return nil, fmt.Errorf("E2A_UPSTREAM_PARAMS: chat completion request members are for an --openai upstream, not %s", u.Kind)
	}
	p, err := openai.ParseParams(u.Params)
	if err != nil {
		return nil, fmt.Errorf("E2A_UPSTREAM_PARAMS: %w", err)
	}
	return p, nil
}

// parseInputModes reads the pool's input modes (--input-modes,
// E2A_UPSTREAM_INPUT_MODES: media types separated by commas, wildcards
// such as image/* allowed): the media types the A2A doors take in a file
// part to the pool and its card lists (nil when list is empty: the
// defaults). A malformed type is refused, quoted, so that the card and the
// door never disagree on a type neither can read.
func parseInputModes(list string) ([]string, error) {
	var modes []string
	for _, m := range strings.Split(list, ",") {
		if m = strings.TrimSpace(m); m == "" {
			continue
		}
		mt, _, err := mime.ParseMediaType(m)
		if err != nil || !strings.Contains(mt, "/") {
			return nil, fmt.Errorf("%q is not a media type (type/subtype, as image/png or image/*)", m)
		}
		modes = append(modes, m)
	}
	return modes, nil
}

// probeUpstream checks, before the pool starts, that the OpenAI or HTTP
// upstream answers (an OpenAI server at {base}/models, the model list every
// compatible server serves, with the key; an HTTP agent at its URL, any
// answer): an unreachable URL or a refused key fails the command at
// start, naming it, instead of every request after its retries. A server
// whose {base}/models is not found (404, or any other client error than
// a refused key: 405 for a base URL that names an endpoint), or answers it
// 2xx with no model list (isModelList: a web page, "{}"), is taken, with a
// warning: the usual mistake is a base URL without its /v1, whose every
// request then fails upstream_rejected. A server error (5xx) is taken with
// a warning of its own (the server may be starting). A list without --model is taken silently (a
// server may serve a model it does not list, or list it by another name:
// Ollama's llama3 as llama3:latest). The A2A upstream is checked by
// reading its card. A refused key says so (refusedAtStart); headers are
// the E2A_UPSTREAM_HEADERS sent.
func probeUpstream(ctx context.Context, client *bridge.Client, u UpstreamConfig, headers map[string]string, log *slog.Logger) error {
	path, call := "", "a GET of its URL"
	var body func(io.Reader)
	listed := false
	switch u.Kind {
	case upstreamA2A:
		return nil
	case upstreamOpenAI:
		path, call = "models", "GET models"
		body = func(r io.Reader) { listed = isModelList(r) }
	}
	ctx, cancel := context.WithTimeout(ctx, u.ConnectTimeout+u.IdleTimeout)
	defer cancel()
	status, err := client.Probe(ctx, path, body)
	if refused := refusedAtStart(err, u, client.Location(), call, headers); refused != nil {
		return refused
	}
	if err != nil {
		return notAnswering(err, u.Kind, client.Location(), call)
	}
	if u.Kind == upstreamOpenAI && status/100 == 5 {
		log.Warn("the OpenAI upstream answered its model list with a server error: requests will fail upstream_unavailable while it does",
			"upstream", client.Location(), "probe", "GET models", "status", status)
		return nil
	}
	if u.Kind == upstreamOpenAI && (status/100 == 4 || status/100 == 2 && !listed) {
		// Location shows whether the base URL has a path ("/…"), never
		// the path or query themselves (a token may be there).
		attrs := []any{"upstream", client.Location(), "probe", "GET models", "status", status}
		if status/100 == 2 {
			attrs = append(attrs, "answer", `not a model list ({"object":"list","data":[…]})`)
		}
		log.Warn("the OpenAI upstream has no model list at its base URL: is the URL the API's base, e.g. ending in /v1? Requests will fail upstream_rejected if it is not",
			attrs...)
	}
	return nil
}

// maxModelListBytes bounds the model list isModelList reads (OpenRouter's
// lists some hundreds of models in a few MB).
const maxModelListBytes = 64 << 20

// isModelList says whether r holds an OpenAI model list: a JSON object
// whose data is an array of objects, and whose object, when there, is
// "list" ({"object":"list","data":[{"id":"gpt-4o",…}]}; Anthropic's
// /v1/models leaves object out). A web page (a base URL that is a UI's),
// "{}" or another API's object is none; so is a list beyond
// maxModelListBytes.
func isModelList(r io.Reader) bool {
	var v struct {
		Object *string          `json:"object"`
		Data   []map[string]any `json:"data"`
	}
	if json.NewDecoder(io.LimitReader(r, maxModelListBytes)).Decode(&v) != nil || v.Data == nil {
		return false
	}
	return v.Object == nil || *v.Object == "list"
}

// startFailure is the error of a bridge whose upstream failed its check at
// start, in words for the operator, unwrapping to the call's error. For
// refused credentials (refusedAtStart) it names the status and the
// variables the credentials came from (never their values), or says none
// were sent: the call's own error said the upstream "does not answer", or
// for an A2A card a protocol error, and an operator looked at the network
// instead of the key.
// notAnswering is the start failure of an upstream that does not answer
// call: the bridge's code, then its message without the words that repeat
// the code ("upstream_unreachable: upstream unreachable: …" said it twice)
// or the A2A SDK's "card request failed", and no "bridge:".
func notAnswering(err error, kind, loc, call string) *startFailure {
	msg := err.Error()
	if be := (*bridge.Error)(nil); errors.As(err, &be) {
		words := strings.TrimPrefix(be.Message, strings.ReplaceAll(be.Code, "_", " ")+": ")
		msg = be.Code + ": " + strings.TrimPrefix(words, "card request failed: ")
	}
	return &startFailure{err: err, msg: fmt.Sprintf("the %s upstream %s does not answer (%s): %s", kind, loc, call, msg)}
}

type startFailure struct {
	msg string
	err error
}

func (e *startFailure) Error() string { return e.msg }
func (e *startFailure) Unwrap() error { return e.err }

// refusedAtStart returns err as a *startFailure when it is the upstream's
// 401 or 403 to call (a bridge.Error of code upstream_auth: an A2A
// agent's card refused is one too), else nil. loc is the upstream's Location; headers the
// E2A_UPSTREAM_HEADERS sent. The upstream's words are quoted as the
// bridge scrubbed them.
func refusedAtStart(err error, u UpstreamConfig, loc, call string, headers map[string]string) error {
	var be *bridge.Error
	if !errors.As(err, &be) || be.Code != bridge.CodeAuth {
		return nil
	}
	status, words := be.Status, be.Message
	if errors.Is(err, bridge.ErrNoToken) {
		return &startFailure{err: err, msg: fmt.Sprintf("no token for the %s upstream %s before %s: %s (%s); the client's credentials "+
			"are E2A_UPSTREAM_OAUTH_CLIENT_ID and E2A_UPSTREAM_OAUTH_CLIENT_SECRET (values not shown), its scopes %s",
			u.Kind, loc, call, words, bridge.CodeAuth, u.scopesSaid())}
	}
	return &startFailure{err: err, msg: fmt.Sprintf("the %s upstream %s answered %d (%s) to %s: %s; %s",
		u.Kind, loc, status, bridge.CodeAuth, call, credentialsRefused(u, headers), words)}
}

// credentialsRefused says which credentials an upstream refused, by the
// variables they came from and the headers' names, or that none were
// sent.
func credentialsRefused(u UpstreamConfig, headers map[string]string) string {
	key, oauth := u.APIKey != "", u.OAuthClientID != ""
	var names []string
	for k := range headers {
		names = append(names, "header "+http.CanonicalHeaderKey(k)+" of E2A_UPSTREAM_HEADERS")
	}
	slices.Sort(names)
	if key {
		names = append([]string{"E2A_UPSTREAM_API_KEY"}, names...)
	}
	if oauth {
		names = append([]string{"a token of E2A_UPSTREAM_OAUTH_CLIENT_ID's client, scopes " + u.scopesSaid()}, names...)
	}
	if len(names) == 0 {
		return "no credentials were sent: set E2A_UPSTREAM_API_KEY (sent as a bearer token), E2A_UPSTREAM_HEADERS " +
			"or E2A_UPSTREAM_OAUTH_* (OAuth 2.0 client credentials)"
	}
	return "it refused the credentials sent (" + strings.Join(names, ", ") + "; values not shown)"
}

// poolCard keeps a pool's card (info, published at start) in the
// E2A_BRIDGE bucket until the context ends: published again at a third of
// the bucket's TTL (at most hourly), so that a pool running longer than
// the TTL keeps it, and, with refresh (an A2A upstream), read from the
// agent's card every so often and published at once when what it shows
// changed (skills added, a new version), so the pool's card follows the
// agent's without a restart. A card that cannot be read keeps the last
// one (logged).
type poolCard struct {
	conv    *bridge.Conversations
	info    bridge.PoolInfo
	ttl     time.Duration
	refresh func(context.Context) (bridge.PoolInfo, error)
	every   time.Duration
	log     *slog.Logger
}

func (k poolCard) run(ctx context.Context) {
	republish := time.Duration(0)
	if k.ttl > 0 {
		republish = min(k.ttl/3, time.Hour)
	}
	tick := republish
	if k.refresh != nil && (tick == 0 || k.every < tick) {
		tick = k.every
	}
	if tick <= 0 {
		return
	}
	last := time.Now()
	for range sleepctx.Ticks(ctx, tick) {
		next, changed := k.read(ctx)
		if !changed && (republish == 0 || time.Since(last) < republish-tick/2) {
			continue
		}
		if err := k.conv.PublishPool(ctx, next); err != nil {
			if ctx.Err() == nil {
				k.log.Warn("bridge: pool card not published", "pool", k.info.Pool, "err", err)
			}
			continue // a change is published at the next tick
		}
		k.info, last = next, time.Now()
	}
}

// read reads the agent's card again (refresh, bounded by the interval
// between reads: a read that stalls must not stop the republishing, or the
// card expires) and returns the pool's card it makes, and whether that
// differs from the one published.
func (k poolCard) read(ctx context.Context) (bridge.PoolInfo, bool) {
	if k.refresh == nil {
		return k.info, false
	}
	rctx, cancel := context.WithTimeout(ctx, k.every)
	defer cancel()
	n, err := k.refresh(rctx)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			k.log.Warn("bridge: the agent's card not read again; the pool keeps its card", "pool", k.info.Pool, "err", err)
		}
		return k.info, false
	case reflect.DeepEqual(n, k.info):
		return k.info, false
	}
	k.log.Info("bridge: the agent's card changed; the pool's card follows", "pool", k.info.Pool, "skills", len(n.Skills))
	return n, true
}
