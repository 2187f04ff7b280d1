package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	legacy "github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/e2a"
	"github.com/e2a-pipeline/pipeline/jsonrpc"
	"github.com/e2a-pipeline/pipeline/normalizer"
	"github.com/e2a-pipeline/pipeline/protocols/host"
	"github.com/e2a-pipeline/pipeline/redact"
	"github.com/e2a-pipeline/pipeline/tenant"
)

// PushConfigs keeps A2A v0.3 push notification configs for the caller
// principal (the envelope user_id). Its errors are *jsonrpc.Error, the
// answer as it is (InvalidParams for a refused config or URL, TaskNotFound
// for a config that is not the principal's); any other is internal.
type PushConfigs interface {
	SetV03(ctx context.Context, principal string, c *legacy.TaskPushConfig) (*legacy.TaskPushConfig, error)
	// SetInlineV03 is SetV03 of a message's inline config, also returning
	// what takes it back when the message is then refused (the config
	// removed, or the one it replaced put back).
	SetInlineV03(ctx context.Context, principal string, c *legacy.TaskPushConfig) (undo func(context.Context) error, err error)
	GetV03(ctx context.Context, principal, taskID, id string) (*legacy.TaskPushConfig, error)
	ListV03(ctx context.Context, principal, taskID string) ([]*legacy.TaskPushConfig, error)
	DeleteV03(ctx context.Context, principal, taskID, id string) error
}

// PushHost is a host that keeps push notification configs: without it
// (or with nil configs) tasks/pushNotificationConfig/* and an inline
// configuration.pushNotificationConfig answer PushNotificationNotSupported
// (-32003).
type PushHost interface {
	PushConfigsV03() PushConfigs
}

var errPushNotSupported = &jsonrpc.Error{Code: jsonrpc.CodeA2APushNotificationNotSupported,
	Message: "Push Notification is not supported"}

func (d *frontDoor) pushConfigs() PushConfigs {
	if ph, ok := d.h.(PushHost); ok {
		return ph.PushConfigsV03()
	}
	return nil
}

// isPushMethod reports whether method is one of v0.3's push-config
// methods.
func isPushMethod(method string) bool {
	switch method {
	case normalizer.A2APushConfigSet, normalizer.A2APushConfigGet, normalizer.A2APushConfigList, normalizer.A2APushConfigDelete:
		return true
	}
	return false
}

// pushAnswer answers v with err as the configs' error.
func pushAnswer(rep host.Reply, v any, err error) {
	var je *jsonrpc.Error
	switch {
	case err == nil:
		rep.Result(v)
	case errors.As(err, &je):
		rep.Error(je)
	default:
		rep.Error(&jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "push notification configs unavailable"})
	}
}

// servePush answers tasks/pushNotificationConfig/{set,get,list,delete}
// after checking that the task is the caller's (another principal's is
// TaskNotFound, as one that does not exist).
func (d *frontDoor) servePush(rep host.Reply, in host.Call, tc host.TaskCaller, nin normalizer.Input, req *jsonrpc.Request) {
	pc := d.pushConfigs()
	if pc == nil {
		rep.Error(errPushNotSupported)
		return
	}
	var p struct {
		ID       string `json:"id"`     // get, list, delete
		TaskID   string `json:"taskId"` // set
		ConfigID string `json:"pushNotificationConfigId"`
	}
	if err := pushParams(req.Params, &p); err != nil {
		rep.Error(err)
		return
	}
	taskID, access := p.ID, tenant.Read
	if req.Method == normalizer.A2APushConfigSet {
		taskID = p.TaskID
	}
	if req.Method == normalizer.A2APushConfigSet || req.Method == normalizer.A2APushConfigDelete {
		access = tenant.Write
	}
	if taskID == "" {
		rep.Error(jsonrpc.InvalidParams("the task id is required"))
		return
	}
	t, err := tc.Task(in.Ctx, taskID, access)
	if err != nil {
		taskNotFound(rep, normalizer.ProtocolA2A, taskID)
		return
	}
	principal := PushPrincipal(in.Ctx, d.h.TaskFrames(), nin, t)
	switch req.Method {
	case normalizer.A2APushConfigSet:
		var c legacy.TaskPushConfig
		if err := pushParams(req.Params, &c); err != nil {
			rep.Error(err)
			return
		}
		v, err := pc.SetV03(in.Ctx, principal, &c)
		pushAnswer(rep, v, err)
	case normalizer.A2APushConfigGet:
		id := p.ConfigID
		if id == "" {
			id = taskID // v0.3: a config set without id has the task's
		}
		v, err := pc.GetV03(in.Ctx, principal, taskID, id)
		if je := (*jsonrpc.Error)(nil); p.ConfigID == "" && errors.As(err, &je) && je.Code == jsonrpc.CodeA2ATaskNotFound {
			// None has the task's id (every config was set with one of
			// its own): the task's first, as a2a-python answers, rather
			// than "not found" for a task that has configs.
			if all, lerr := pc.ListV03(in.Ctx, principal, taskID); lerr == nil && len(all) > 0 {
				v, err = all[0], nil
			}
		}
		if err == nil && !PushSecretsShown(nin, t) {
			HideSecretsV03(v)
		}
		pushAnswer(rep, v, err)
	case normalizer.A2APushConfigList:
		v, err := pc.ListV03(in.Ctx, principal, taskID)
		if err == nil && !PushSecretsShown(nin, t) {
			for _, c := range v {
				HideSecretsV03(c)
			}
		}
		pushAnswer(rep, v, err)
	case normalizer.A2APushConfigDelete:
		if p.ConfigID == "" {
			rep.Error(jsonrpc.InvalidParams("pushNotificationConfigId is required"))
			return
		}
		pushAnswer(rep, nil, pc.DeleteV03(in.Ctx, principal, taskID, p.ConfigID))
	}
}

// pushParams decodes the params of a push-config call into v, refused in
// the client's words as the other calls' params are: required, an object,
// each member of its JSON type. They were refused with encoding/json's
// error, "unexpected end of JSON input" for none, and for an array or a
// member of another type one naming Go's types ("cannot unmarshal array
// into Go value of type struct { ID string ...").
func pushParams(params json.RawMessage, v any) *jsonrpc.Error {
	params = bytes.TrimSpace(params)
	switch {
	case len(params) == 0 || string(params) == "null":
		return jsonrpc.InvalidParams("params are required")
	case params[0] != '{':
		return jsonrpc.InvalidParams("params must be an object")
	}
	err := json.Unmarshal(params, v)
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te) && te.Field != "":
		return jsonrpc.InvalidParams(fmt.Sprintf("params: %s: cannot be a JSON %s", te.Field, te.Value))
	case errors.As(err, &te):
		return jsonrpc.InvalidParams("params: cannot be a JSON " + te.Value)
	}
	return jsonrpc.InvalidParams("params: " + err.Error())
}

// HideSecretsV03 blanks in c what a principal other than its task's
// owner may not read (PushSecretsShown): the token, the credentials and
// the URL's path and query (redact.URL), as the console shows configs. It
// returns c.
func HideSecretsV03(c *legacy.TaskPushConfig) *legacy.TaskPushConfig {
	c.Config.Token, c.Config.URL = "", redact.URL(c.Config.URL)
	if c.Config.Auth != nil {
		c.Config.Auth.Credentials = ""
	}
	return c
}

// HideSecretsV1 is HideSecretsV03 for a config as A2A v1.0 answers it.
func HideSecretsV1(c *a2a.PushConfig) *a2a.PushConfig {
	c.Token, c.URL = "", redact.URL(c.URL)
	if c.Auth != nil {
		c.Auth.Credentials = ""
	}
	return c
}

// PushSecretsShown reports whether the caller of in reads the secrets of
// task t's push configs (their tokens, credentials and URLs whole): the
// task's owner does, and anyone where principals are not kept apart
// (authentication off, a gateway asserting users). Another principal a
// role lets read the task (audit, an admin) gets them hidden
// (HideSecretsV1, HideSecretsV03): it was handed the owner's
// webhook token and credentials, with which it could forge deliveries.
func PushSecretsShown(in normalizer.Input, t *host.Task) bool {
	p := in.Principal
	return p == nil || p.UserID == "" || p.AssertsUser || t.Principal == "" || normalizer.CallerUserID(in) == t.Principal
}

// PushPrincipal is the principal under which the push notification
// configs of task t (the caller's, checked) are kept, where the push
// stage finds them, as a message's inline config is stored
// (InlinePushPrincipal). An authenticated caller's envelopes carry its
// own id (normalizer.CallerUserID): the task's owner is taken (pushOwner),
// the caller itself or the owner of the task an admin acts on, whose
// configs the stage reads for every turn of the task. With
// authentication off (in.Principal nil, or asserting users: nobody is
// kept apart) they carry the user each message claims, its metadata's
// included: the user of the task's newest request is taken (its
// envelope's, else its first frame's), the caller's id when neither is
// stored.
func PushPrincipal(ctx context.Context, f host.TaskRequests, in normalizer.Input, t *host.Task) string {
	if owner, ok := pushOwner(in, t); ok {
		return owner
	}
	caller := normalizer.CallerUserID(in)
	last := t.LastRequest()
	if last == "" || f == nil {
		return caller
	}
	rq, err := f.LoadRequestHead(ctx, last)
	switch {
	case err != nil:
		return caller
	case (rq.Envelope == nil || rq.Envelope.UserID == "") && len(rq.Frames) > 0:
		return rq.Frames[0].UserID
	case rq.Envelope != nil:
		return rq.Envelope.UserID
	}
	return caller
}

// pushOwner is the principal under which an authenticated caller of in
// keeps the push configs of task t (nil: a new task, the caller's own):
// the task's owner (host.Session.Principal), the caller itself or the
// owner of the task an admin acts on, else the caller. An admin's configs
// were its own, which the push stage never reads for alice's task: the
// config it created (by the methods, or inline with its message) was
// accepted and never posted to, its delete of hers answered success and
// left it. False where principals are not kept apart (authentication
// off, a gateway asserting users): the envelopes carry the user each
// message claims, which the caller takes instead (PushPrincipal,
// InlinePushPrincipal).
func pushOwner(in normalizer.Input, t *host.Task) (string, bool) {
	p := in.Principal
	if p == nil || p.UserID == "" || p.AssertsUser {
		return "", false
	}
	if t != nil && t.Principal != "" {
		return t.Principal, true
	}
	return normalizer.CallerUserID(in), true
}

// InlinePushPrincipal is the principal under which a message's inline
// push config is stored, env its envelope and t the task it continues
// (nil: a new task): the principal the push-config methods keep the
// task's configs under (PushPrincipal: its owner, also for an admin's
// message continuing another principal's task) with authentication;
// without it, or from a gateway asserting users, the user the message
// claims (env's user_id: its metadata, X-User-ID), whose envelopes the
// push stage finds the configs by.
func InlinePushPrincipal(in normalizer.Input, t *host.Task, env *e2a.Envelope) string {
	if owner, ok := pushOwner(in, t); ok {
		return owner
	}
	return env.UserID
}

// inlinePush stores message/send's or message/stream's inline
// configuration.pushNotificationConfig for the task of env, the request's
// envelope, before it is published, returning what takes it back (nil
// when there is none); false when it answered rep with a refusal. prev is
// the task the message continues (nil: a new task), the caller's or one
// an admin may write (admitTurn); the config is stored under
// InlinePushPrincipal, as tasks/pushNotificationConfig/set stores one.
func (d *frontDoor) inlinePush(rep host.Reply, in host.Call, tc host.TaskCaller, req *jsonrpc.Request, env *e2a.Envelope, prev *host.Task) (func(context.Context) error, bool) {
	if req.Method != normalizer.A2AMessageSend && req.Method != normalizer.A2AMessageStream {
		return nil, true
	}
	var p struct {
		Configuration *struct {
			PushConfig *legacy.PushConfig `json:"pushNotificationConfig"`
		} `json:"configuration"`
	}
	if json.Unmarshal(req.Params, &p) != nil || p.Configuration == nil || p.Configuration.PushConfig == nil {
		return nil, true
	}
	pc := d.pushConfigs()
	if pc == nil {
		rep.Error(errPushNotSupported)
		return nil, false
	}
	if env.TaskID == "" {
		rep.Error(jsonrpc.InvalidParams("a push notification config needs a task"))
		return nil, false
	}
	principal := InlinePushPrincipal(tc.Input(in, req), prev, env)
	undo, err := pc.SetInlineV03(in.Ctx, principal, &legacy.TaskPushConfig{TaskID: legacy.TaskID(env.TaskID), Config: *p.Configuration.PushConfig})
	if err != nil {
		pushAnswer(rep, nil, err)
		return nil, false
	}
	return undo, true
}
