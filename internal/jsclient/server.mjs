// An A2A agent served by the official JavaScript SDK (@a2a-js/sdk 1.3.0's
// DefaultRequestHandler and its transports), for the A2A bridge's tests.
// Started by internal/jsupstream:
//
//   node server.mjs [--binding jsonrpc|rest|grpc] [--v03] [--no-streaming]
//                   [--bearer TOKEN] [--slow-ms N] [--slow-chunks N]
//
// It listens on a free loopback port and prints one line,
// {"url": "http://127.0.0.1:PORT", "interface": "..."}; the agent card is
// at /.well-known/agent-card.json and declares one interface, the
// binding's, as the SDK's multi-transport sample does:
//   - jsonrpc (default): JSON-RPC at /a2a/jsonrpc, through the SDK's
//     JsonRpcTransportHandler (v1.0) or LegacyJsonRpcTransportHandler
//     (v0.3, with --v03 and a v0.3 card) on node:http;
//   - rest: HTTP+JSON under /a2a/rest, the SDK's express restHandler (with
//     legacyCompat for --v03: v0.3's /v1/... routes);
//   - grpc: gRPC on a second loopback port ("127.0.0.1:PORT" in the card),
//     the SDK's grpcService (legacyGrpcService for --v03) on @grpc/grpc-js.
// GET /_fixture/record answers what the server received:
// {calls, executions, cancels}. JSON-RPC calls are recorded as they
// arrive, under the request's method; HTTP+JSON and gRPC calls at the
// request handler, under their v1.0 method names (SendMessage,
// SendStreamingMessage, GetTask, CancelTask, SubscribeToTask ...), a call
// refused for want of the bearer token at the transport.
//
// The scenarios and their content are internal/a2aupstream's (content.go):
// the message's first text part chooses by its prefix.
import http from 'node:http';
import { randomUUID } from 'node:crypto';

const sdk = await import('@a2a-js/sdk');
const server = await import('@a2a-js/sdk/server');
const compat = await import('@a2a-js/sdk/compat/v0_3/server');
const { AgentEvent, DefaultRequestHandler, InMemoryTaskStore, JsonRpcTransportHandler, defaultServerCallContextBuilder, validateVersion, UnauthenticatedUser } = server;
const { AgentCard, Message, Task, TaskStatusUpdateEvent, TaskArtifactUpdateEvent, TaskState, formatSSEEvent, formatSSEErrorEvent } = sdk;

const args = process.argv.slice(2);
const flag = (name) => args.includes(name);
const value = (name, dflt) => (args.includes(name) ? args[args.indexOf(name) + 1] : dflt);
const V03 = flag('--v03');
const STREAMING = !flag('--no-streaming');
const BEARER = value('--bearer', '');
const SLOW_MS = Number(value('--slow-ms', '50'));
const SLOW_CHUNKS = Number(value('--slow-chunks', '1200'));
const BINDING = value('--binding', 'jsonrpc');
const RPC_PATH = '/a2a/jsonrpc';
const REST_PATH = '/a2a/rest';
const BINDINGS = { jsonrpc: 'JSONRPC', rest: 'HTTP+JSON', grpc: 'GRPC' };
if (!BINDINGS[BINDING]) {
  process.stderr.write('server.mjs: --binding ' + BINDING + ': want jsonrpc, rest or grpc\n');
  process.exit(2);
}

const record = { calls: [], executions: [], cancels: [] };

// Content, as internal/a2aupstream/content.go derives it.
const scenarios = ['stream', 'tool', 'ask', 'auth', 'fail', 'slow', 'message', 'file'];
function scenario(text) {
  for (const s of scenarios) if (text.startsWith(s + ':')) return [s, text.slice(s.length + 1).trim()];
  return ['echo', text];
}
const streamChunks = (body) => ('Streaming ' + body + ' in chunks.').split(/(?<= )/).filter((c) => c !== '');
const C = {
  thought: (b) => 'Thinking about ' + b,
  toolCall: (b) => ({ id: 'call-1', type: 'function', name: 'lookup', args: JSON.stringify({ query: b }) }),
  toolResponse: (b) => ({ id: 'call-1', name: 'lookup', response: JSON.stringify({ result: 'found ' + b }) }),
  toolText: (b) => 'Looked up ' + b + '.',
  askChunk: 'One question first.',
  askQuestion: 'What is your name?',
  askReply: (a) => 'Hello, ' + a,
  authPrompt: 'Sign in to continue.',
  authReply: (t) => 'Authorized: ' + t,
  fail: (b) => 'Failed: ' + b,
  message: (b) => 'Direct answer: ' + b,
  fileBytes: (b) => Buffer.from('File for ' + b).toString('base64'),
  fileURL: (b) => 'https://files.example.com/' + encodeURIComponent(b) + '.png',
  echo: (t) => 'Echo: ' + t,
  slow: (i) => `tick ${i} `,
  canceled: 'Canceled.',
};

const firstText = (m) => {
  for (const p of m?.parts ?? []) if (p.content?.$case === 'text') return p.content.value;
  return '';
};

// The agent.
const canceled = new Set();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

class Executor {
  async execute(rc, bus) {
    const { taskId, contextId } = rc;
    const text = firstText(rc.userMessage);
    let [name, body] = scenario(text);
    const stored = rc.task;
    if (stored) {
      name = stored.status?.state === TaskState.TASK_STATE_AUTH_REQUIRED ? 'authorized' : 'answer';
      body = text;
    }
    record.executions.push({ scenario: name, taskId, contextId, text, continued: !!stored, history: (stored?.history ?? []).map(firstText) });
    const status = (state, msg) =>
      bus.publish(AgentEvent.statusUpdate(TaskStatusUpdateEvent.fromJSON({ taskId, contextId, status: { state, message: msg, timestamp: new Date().toISOString() } })));
    const agentMsg = (label, t) => ({ messageId: taskId + '/' + label, role: 'ROLE_AGENT', taskId, contextId, parts: [{ text: t }] });
    const artifact = (artifactId, parts, append = false, lastChunk = true) =>
      bus.publish(AgentEvent.artifactUpdate(TaskArtifactUpdateEvent.fromJSON({ taskId, contextId, append, lastChunk, artifact: { artifactId, parts } })));

    if (name === 'message') {
      bus.publish(AgentEvent.message(Message.fromJSON({ messageId: randomUUID(), role: 'ROLE_AGENT', contextId, parts: [{ text: C.message(body) }] })));
      bus.finished();
      return;
    }
    if (name === 'echo') {
      bus.publish(AgentEvent.task(Task.fromJSON({
        id: taskId, contextId, status: { state: 'TASK_STATE_COMPLETED' },
        history: [Message.toJSON(rc.userMessage)],
        artifacts: [{ artifactId: 'echo', parts: [{ text: C.echo(text) }] }],
      })));
      bus.finished();
      return;
    }
    // The SDK wants a task event first, on a follow-up turn too. The
    // stored task is still in input-required or auth-required: publishing
    // it as is would open the new turn's stream with the interrupted
    // state, so it goes out in working.
    if (stored) {
      bus.publish(AgentEvent.task({ ...stored, status: { state: TaskState.TASK_STATE_WORKING, message: undefined, timestamp: new Date().toISOString() } }));
    } else {
      bus.publish(AgentEvent.task(Task.fromJSON({ id: taskId, contextId, status: { state: 'TASK_STATE_SUBMITTED' }, history: [Message.toJSON(rc.userMessage)] })));
      status('TASK_STATE_WORKING');
    }
    switch (name) {
      case 'stream': {
        artifact('thought', [{ text: C.thought(body), metadata: { thought: true } }]);
        const chunks = streamChunks(body);
        chunks.forEach((c, i) => artifact('text', [{ text: c }], i > 0, i === chunks.length - 1));
        artifact('data', [{ data: { k: 'v' } }]);
        status('TASK_STATE_COMPLETED');
        break;
      }
      case 'tool':
        artifact('tool-call', [{ data: C.toolCall(body), metadata: { type: 'function_call' } }]);
        artifact('tool-response', [{ data: C.toolResponse(body), metadata: { type: 'function_response' } }]);
        artifact('text', [{ text: C.toolText(body) }]);
        status('TASK_STATE_COMPLETED');
        break;
      case 'ask':
        artifact('ask', [{ text: C.askChunk }]);
        status('TASK_STATE_INPUT_REQUIRED', agentMsg('ask', C.askQuestion));
        break;
      case 'answer':
        artifact('reply', [{ text: C.askReply(body) }]);
        status('TASK_STATE_COMPLETED');
        break;
      case 'auth':
        status('TASK_STATE_AUTH_REQUIRED', agentMsg('auth', C.authPrompt));
        break;
      case 'authorized':
        artifact('reply', [{ text: C.authReply(body) }]);
        status('TASK_STATE_COMPLETED');
        break;
      case 'fail':
        status('TASK_STATE_FAILED', agentMsg('fail', C.fail(body)));
        break;
      case 'file':
        artifact('file-bytes', [{ raw: C.fileBytes(body), filename: 'hello.txt', mediaType: 'text/plain' }]);
        artifact('file-url', [{ url: C.fileURL(body), mediaType: 'image/png' }]);
        status('TASK_STATE_COMPLETED');
        break;
      case 'slow':
        for (let i = 1; i <= SLOW_CHUNKS; i++) {
          if (canceled.has(taskId)) return;
          artifact('slow', [{ text: C.slow(i) }], i > 1, false);
          await sleep(SLOW_MS);
        }
        if (!canceled.has(taskId)) status('TASK_STATE_COMPLETED');
        break;
    }
  }

  async cancelTask(taskId, bus) {
    record.cancels.push(taskId);
    canceled.add(taskId);
    const contextId = record.executions.find((e) => e.taskId === taskId)?.contextId ?? '';
    bus.publish(AgentEvent.statusUpdate(TaskStatusUpdateEvent.fromJSON({
      taskId, contextId,
      status: { state: 'TASK_STATE_CANCELED', timestamp: new Date().toISOString(), message: { messageId: taskId + '/canceled', role: 'ROLE_AGENT', taskId, contextId, parts: [{ text: C.canceled }] } },
    })));
  }
}

// The card, in v1.0 form (served as v0.3 with --v03), as proto JSON.
let base = '';
let iface = ''; // the binding's URL: base + RPC_PATH, base + REST_PATH, or the gRPC host:port
function cardJSON() {
  const c = {
    name: 'jsupstream',
    description: 'Test agent on @a2a-js/sdk: stream, tool, ask, auth, fail, slow, message, file, echo scenarios',
    version: '1.0.0',
    supportedInterfaces: [{ url: iface, protocolBinding: BINDINGS[BINDING], protocolVersion: V03 ? '0.3' : '1.0' }],
    capabilities: { streaming: STREAMING },
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain', 'application/json'],
    skills: [{ id: 'scenarios', name: 'Scenarios', description: 'Answers by the prefix of the message', tags: ['test'], examples: ['stream: hello'] }],
  };
  if (BEARER) {
    c.securitySchemes = { bearer: { httpAuthSecurityScheme: { scheme: 'Bearer' } } };
    c.securityRequirements = [{ schemes: { bearer: { list: [] } } }];
  }
  return c;
}

function v03Card() {
  const c = cardJSON();
  const out = {
    name: c.name, description: c.description, version: c.version,
    url: iface, preferredTransport: BINDINGS[BINDING], protocolVersion: '0.3.0',
    capabilities: { streaming: STREAMING }, defaultInputModes: c.defaultInputModes, defaultOutputModes: c.defaultOutputModes,
    skills: c.skills.map(({ id, name, description, tags, examples }) => ({ id, name, description, tags, examples })),
  };
  if (BEARER) {
    out.securitySchemes = { bearer: { type: 'http', scheme: 'Bearer' } };
    out.security = [{ bearer: [] }];
  }
  return out;
}

// The HTTP side: what the SDK's express jsonRpcHandler does, on node:http.
function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function recordCall(req, body) {
  const p = body?.params ?? {};
  const m = p.message ?? {};
  const text = (m.parts ?? []).map((x) => x.text ?? '').find((t) => t !== '') ?? '';
  const headers = {};
  for (const [k, v] of Object.entries(req.headers)) headers[k] = v;
  const call = { method: body?.method ?? '', taskId: m.taskId ?? p.id ?? '', contextId: m.contextId ?? '', text, headers, refused: false };
  record.calls.push(call);
  return call;
}

async function serveRPC(req, res, handlers) {
  const raw = await readBody(req);
  let body;
  try {
    body = JSON.parse(raw);
  } catch {
    body = raw;
  }
  const call = recordCall(req, body);
  const legacy = V03;
  const mapToError = legacy ? compat.LegacyJsonRpcTransportHandler.mapToLegacyJSONRPCError : JsonRpcTransportHandler.mapToJSONRPCError;
  if (BEARER && req.headers.authorization !== 'Bearer ' + BEARER) {
    call.refused = true;
    res.writeHead(401, { 'Content-Type': 'application/json', 'WWW-Authenticate': 'Bearer' });
    res.end(JSON.stringify({ error: 'unauthenticated' }));
    return;
  }
  const id = body?.id ?? null;
  try {
    const context = defaultServerCallContextBuilder({ user: new UnauthenticatedUser(), headers: req.headers, requestedVersion: req.headers['a2a-version'] || undefined });
    if (!legacy) validateVersion(context.requestedVersion, await handlers.request.getAgentCard(), 'JSONRPC');
    const out = await (legacy ? handlers.legacy : handlers.rpc).handle(body, context);
    if (typeof out?.[Symbol.asyncIterator] !== 'function') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(out));
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive' });
    try {
      for await (const ev of out) res.write(formatSSEEvent(ev));
    } catch (err) {
      res.write(formatSSEErrorEvent({ jsonrpc: '2.0', id, error: mapToError(err) }));
    }
    res.end();
  } catch (err) {
    if (!res.headersSent) res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', id, error: mapToError(err) }));
  }
}

let handlers; // set once the port, so the card's URL, is known

// HTTP+JSON and gRPC: the SDK's own transports over the request handler,
// which records each call it is given (recording); a call without the
// bearer token is refused by the transport's gate before the SDK sees it.
const v1Methods = {
  sendMessage: 'SendMessage', sendMessageStream: 'SendStreamingMessage', getTask: 'GetTask', listTasks: 'ListTasks',
  cancelTask: 'CancelTask', resubscribe: 'SubscribeToTask', getAuthenticatedExtendedAgentCard: 'GetExtendedAgentCard',
  createTaskPushNotificationConfig: 'CreateTaskPushNotificationConfig', getTaskPushNotificationConfig: 'GetTaskPushNotificationConfig',
  listTaskPushNotificationConfigs: 'ListTaskPushNotificationConfigs', deleteTaskPushNotificationConfig: 'DeleteTaskPushNotificationConfig',
};

function recording(request) {
  return new Proxy(request, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      if (typeof v !== 'function') return v;
      if (!Object.hasOwn(v1Methods, prop)) return v.bind(target);
      return (params, context) => {
        const m = params?.message;
        const headers = { ...(context?.state?.get('headers') ?? {}) };
        record.calls.push({
          method: v1Methods[prop], taskId: m?.taskId || params?.id || params?.taskId || '', contextId: m?.contextId ?? '',
          text: firstText(m), headers, refused: false,
        });
        return v.call(target, params, context);
      };
    },
  });
}

const authorized = (value) => !BEARER || value === 'Bearer ' + BEARER;
const refuse = (method, headers) => record.calls.push({ method, taskId: '', contextId: '', text: '', headers, refused: true });

async function restApp(requestHandler) {
  const express = (await import('express')).default;
  const { restHandler, UserBuilder } = await import('@a2a-js/sdk/server/express');
  const app = express();
  app.use(REST_PATH, (req, res, next) => {
    if (authorized(req.headers.authorization)) return next();
    refuse(req.method + ' ' + req.path, { ...req.headers });
    res.status(401).set('WWW-Authenticate', 'Bearer').json({ error: 'unauthenticated' });
  });
  app.use(REST_PATH, restHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication, legacyCompat: V03 ? { enabled: true } : undefined }));
  return app;
}

function bindGRPC(server) {
  return import('@grpc/grpc-js').then(
    (grpc) =>
      new Promise((resolve, reject) =>
        server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port)))),
  );
}

async function serveGRPC(server, requestHandler) {
  const grpc = await import('@grpc/grpc-js');
  const v1 = await import('@a2a-js/sdk/server/grpc');
  const legacy = await import('@a2a-js/sdk/compat/v0_3/server/grpc');
  const opts = { requestHandler, userBuilder: v1.UserBuilder.noAuthentication };
  const impl = V03 ? legacy.legacyGrpcService(opts) : v1.grpcService(opts);
  const gated = {};
  for (const [name, fn] of Object.entries(impl)) {
    gated[name] = (call, callback) => {
      const md = call.metadata.getMap();
      if (authorized(String(md.authorization ?? ''))) return fn(call, callback);
      const headers = {};
      for (const [k, v] of Object.entries(md)) headers[k] = v.toString();
      refuse(name, headers);
      const err = { code: grpc.status.UNAUTHENTICATED, details: 'unauthenticated' };
      if (callback) callback(err);
      else call.emit('error', err);
    };
  }
  server.addService(V03 ? legacy.LegacyA2AService : v1.A2AService, gated);
}

const srv = http.createServer((req, res) => {
  const path = req.url.split('?')[0];
  if (req.method === 'GET' && path === '/.well-known/agent-card.json') {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(V03 ? v03Card() : AgentCard.toJSON(handlers.card)));
  } else if (req.method === 'GET' && path === '/_fixture/record') {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(record));
  } else if (BINDING === 'rest' && (path === REST_PATH || path.startsWith(REST_PATH + '/'))) {
    handlers.rest(req, res);
  } else if (BINDING === 'jsonrpc' && req.method === 'POST' && path === RPC_PATH) {
    serveRPC(req, res, handlers).catch((err) => {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(err));
    });
  } else {
    res.writeHead(404);
    res.end();
  }
});

srv.listen(0, '127.0.0.1', async () => {
  base = 'http://127.0.0.1:' + srv.address().port;
  iface = base + RPC_PATH;
  let grpcServer;
  if (BINDING === 'rest') iface = base + REST_PATH;
  if (BINDING === 'grpc') {
    grpcServer = new (await import('@grpc/grpc-js')).Server();
    iface = '127.0.0.1:' + (await bindGRPC(grpcServer));
  }
  const card = AgentCard.fromJSON(cardJSON());
  const request = new DefaultRequestHandler(card, new InMemoryTaskStore(), new Executor());
  handlers = { card, request, rpc: new JsonRpcTransportHandler(request), legacy: new compat.LegacyJsonRpcTransportHandler(request) };
  if (BINDING === 'rest') handlers.rest = await restApp(recording(request));
  if (BINDING === 'grpc') await serveGRPC(grpcServer, recording(request));
  process.stdout.write(JSON.stringify({ url: base, interface: iface }) + '\n');
});

process.on('SIGTERM', () => process.exit(0));
