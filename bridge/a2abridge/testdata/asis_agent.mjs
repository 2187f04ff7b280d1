// An A2A agent on @a2a-js/sdk (the version internal/jsclient pins) whose
// follow-up turn opens with the stored task as is: in the interrupted
// state the earlier turn ended in (input-required, with its question),
// then working, its reply, completed. The SDK ends a stream only at a
// status update, so the stale task is just the stream's first event.
// The "ask:" content of internal/a2aupstream: "One question first." in
// artifact "ask", then input-required "What is your name?"; the answer
// A completes the task with "Hello, A" in artifact "reply".
//
//   node asis_agent.mjs [--no-streaming]
//
// run in internal/jsclient (where the SDK is installed); it prints
// {"url": "http://127.0.0.1:PORT"}.
import http from 'node:http';

const sdk = await import('@a2a-js/sdk');
const server = await import('@a2a-js/sdk/server');
const { AgentEvent, DefaultRequestHandler, InMemoryTaskStore, JsonRpcTransportHandler, defaultServerCallContextBuilder, UnauthenticatedUser } = server;
const { AgentCard, Message, Task, TaskStatusUpdateEvent, TaskArtifactUpdateEvent, formatSSEEvent, formatSSEErrorEvent } = sdk;
const STREAMING = !process.argv.includes('--no-streaming');

const firstText = (m) => {
  for (const p of m?.parts ?? []) if (p.content?.$case === 'text') return p.content.value;
  return '';
};

class Executor {
  async execute(rc, bus) {
    const { taskId, contextId } = rc;
    const status = (state, message) =>
      bus.publish(AgentEvent.statusUpdate(TaskStatusUpdateEvent.fromJSON({ taskId, contextId, status: { state, message, timestamp: new Date().toISOString() } })));
    const artifact = (artifactId, text) =>
      bus.publish(AgentEvent.artifactUpdate(TaskArtifactUpdateEvent.fromJSON({ taskId, contextId, append: false, lastChunk: true, artifact: { artifactId, parts: [{ text }] } })));
    if (rc.task) {
      bus.publish(AgentEvent.task(rc.task)); // as stored: input-required, the question its status message
      status('TASK_STATE_WORKING');
      artifact('reply', 'Hello, ' + firstText(rc.userMessage));
      status('TASK_STATE_COMPLETED');
      return;
    }
    bus.publish(AgentEvent.task(Task.fromJSON({ id: taskId, contextId, status: { state: 'TASK_STATE_SUBMITTED' }, history: [Message.toJSON(rc.userMessage)] })));
    status('TASK_STATE_WORKING');
    artifact('ask', 'One question first.');
    status('TASK_STATE_INPUT_REQUIRED', { messageId: taskId + '/ask', role: 'ROLE_AGENT', taskId, contextId, parts: [{ text: 'What is your name?' }] });
  }

  async cancelTask(taskId, bus) {}
}

let handlers;

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

async function serveRPC(req, res) {
  let body;
  try {
    body = JSON.parse(await readBody(req));
  } catch {
    body = {};
  }
  const id = body?.id ?? null;
  try {
    const context = defaultServerCallContextBuilder({ user: new UnauthenticatedUser(), headers: req.headers, requestedVersion: req.headers['a2a-version'] || undefined });
    const out = await handlers.rpc.handle(body, context);
    if (typeof out?.[Symbol.asyncIterator] !== 'function') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(out));
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', Connection: 'keep-alive' });
    try {
      for await (const ev of out) res.write(formatSSEEvent(ev));
    } catch (err) {
      res.write(formatSSEErrorEvent({ jsonrpc: '2.0', id, error: JsonRpcTransportHandler.mapToJSONRPCError(err) }));
    }
    res.end();
  } catch (err) {
    if (!res.headersSent) res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', id, error: JsonRpcTransportHandler.mapToJSONRPCError(err) }));
  }
}

const srv = http.createServer((req, res) => {
  const path = req.url.split('?')[0];
  if (req.method === 'GET' && path === '/.well-known/agent-card.json') {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(AgentCard.toJSON(handlers.card)));
  } else if (req.method === 'POST' && path === '/rpc') {
    serveRPC(req, res).catch((err) => {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(err));
    });
  } else {
    res.writeHead(404);
    res.end();
  }
});

srv.listen(0, '127.0.0.1', () => {
  const base = 'http://127.0.0.1:' + srv.address().port;
  const card = AgentCard.fromJSON({
    name: 'asis', description: 'Opens a follow-up turn with the stored task as is', version: '1.0.0',
    supportedInterfaces: [{ url: base + '/rpc', protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
    capabilities: { streaming: STREAMING },
    defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
    skills: [{ id: 'ask', name: 'ask', description: 'asks, then answers', tags: ['test'] }],
  });
  const request = new DefaultRequestHandler(card, new InMemoryTaskStore(), new Executor());
  handlers = { card, rpc: new JsonRpcTransportHandler(request) };
  process.stdout.write(JSON.stringify({ url: base }) + '\n');
});

process.on('SIGTERM', () => process.exit(0));
