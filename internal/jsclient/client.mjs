// Drives the pipeline with an official A2A JavaScript SDK client, as its
// users would: resolve the agent card, build the client from it, then
// send, stream, get (and list on v1.0). Prints one JSON summary line that
// jsclient_test.go checks; any failure exits non-zero with the error.
//
//   node client.mjs <base-url> v1 JSONRPC|HTTP+JSON
//   node client.mjs <base-url> v03
//   node client.mjs <base-url> push JSONRPC|HTTP+JSON <webhook-url>
//   node client.mjs <base-url> card   (the card as the SDK's resolver reads it)
//   node client.mjs <base-url> extcard JSONRPC|HTTP+JSON <api-key>   (the extended card, as getAgentCard reads it)
import { randomUUID } from 'node:crypto';

const [base, generation, binding] = process.argv.slice(2);

// texts collects every text of a result, whatever its shape: v1.0 parts
// ({text}, or {content: {$case: 'text', value}} in the SDK's objects) and
// v0.3 parts ({kind: 'text', text}).
function texts(v, out = []) {
  if (Array.isArray(v)) {
    v.forEach((x) => texts(x, out));
  } else if (v && typeof v === 'object') {
    if (v.$case === 'text' && typeof v.value === 'string') out.push(v.value);
    if (typeof v.text === 'string') out.push(v.text);
    for (const [k, x] of Object.entries(v)) if (k !== 'text') texts(x, out);
  }
  return out;
}

// states collects every task state a value names.
function states(v, out = []) {
  if (Array.isArray(v)) {
    v.forEach((x) => states(x, out));
  } else if (v && typeof v === 'object') {
    if (v.state !== undefined) out.push(v.state);
    for (const x of Object.values(v)) states(x, out);
  }
  return out;
}

function taskIdOf(v) {
  if (!v || typeof v !== 'object') return '';
  if (typeof v.taskId === 'string' && v.taskId) return v.taskId;
  for (const x of Object.values(v)) {
    const id = taskIdOf(x);
    if (id) return id;
  }
  return '';
}

// exchange sends one message and streams another with client (req makes
// the request of a text), gets the streamed task back with get(taskId),
// and returns the summary both generations print: name renders the
// stream's task states, getState the got task's.
async function exchange(client, req, get, name, getState) {
  const sent = await client.sendMessage(req('hello from js'));
  const events = [];
  for await (const ev of client.sendMessageStream(req('stream from js'))) events.push(ev);
  const taskId = taskIdOf(events);
  const got = await get(taskId);
  return {
    send_text: texts(sent).join(''),
    stream_events: events.length,
    stream_text: texts(events).join(''),
    stream_states: states(events).map(name),
    task_id: taskId,
    get_state: getState(got.status?.state),
    get_text: texts(got.artifacts).join(''),
  };
}

async function v1() {
  const { ClientFactory, ClientFactoryOptions } = await import('@a2a-js/sdk/client');
  const { SendMessageRequest, TaskState, taskStateToJSON } = await import('@a2a-js/sdk');
  const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: [binding] });
  const client = await new ClientFactory(options).createFromUrl(base);
  const req = (text) =>
    SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text }] } });
  const name = (s) => (typeof s === 'number' ? taskStateToJSON(s) : String(s));
  const get = (id) => client.getTask({ id, historyLength: undefined, tenant: '' });
  const sum = await exchange(client, req, get, name, (s) => name(s ?? TaskState.TASK_STATE_UNSPECIFIED));
  const list = await client.listTasks({ pageSize: 100, tenant: '', contextId: '', status: 0, pageToken: '', includeArtifacts: false });
  return { ...sum, listed: (list.tasks ?? []).some((t) => t.id === sum.task_id) };
}

async function v03() {
  const { ClientFactory } = await import('a2a-js-sdk-03/client');
  const client = await new ClientFactory().createFromUrl(base);
  const msg = (text) => ({ message: { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text }] } });
  return exchange(client, msg, (id) => client.getTask({ id }), String, String);
}

// push: a message with an inline taskPushNotificationConfig to hook
// (token js-token), then a second config created, got, listed and
// deleted on the same task.
async function push(hook) {
  const { ClientFactory, ClientFactoryOptions } = await import('@a2a-js/sdk/client');
  const sdk = await import('@a2a-js/sdk');
  const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { preferredTransports: [binding] });
  const client = await new ClientFactory(options).createFromUrl(base);
  const sent = await client.sendMessage(sdk.SendMessageRequest.fromJSON({
    message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ text: 'push from js' }] },
    configuration: { taskPushNotificationConfig: { url: hook, token: 'js-token' } },
  }));
  const taskId = sent.id ?? taskIdOf(sent) ?? sent.payload?.value?.id;
  const created = await client.createTaskPushNotificationConfig(sdk.TaskPushNotificationConfig.fromJSON({
    taskId, id: 'js-second', url: hook + '/second', token: 'js-second-token' }));
  const got = await client.getTaskPushNotificationConfig(sdk.GetTaskPushNotificationConfigRequest.fromJSON({ taskId, id: 'js-second' }));
  const listed = await client.listTaskPushNotificationConfig(sdk.ListTaskPushNotificationConfigsRequest.fromJSON({ taskId }));
  await client.deleteTaskPushNotificationConfig(sdk.DeleteTaskPushNotificationConfigRequest.fromJSON({ taskId, id: 'js-second' }));
  const after = await client.listTaskPushNotificationConfig(sdk.ListTaskPushNotificationConfigsRequest.fromJSON({ taskId }));
  return {
    task_id: taskId,
    created_id: created.id,
    got_url: got.url,
    listed: (listed.configs ?? []).length,
    after_delete: (after.configs ?? []).length,
  };
}

// card: the security members of the card as the SDK's default resolver
// reads them (what a client built from the card sees).
async function card() {
  const { AgentCardResolver } = await import('@a2a-js/sdk/client');
  const c = await AgentCardResolver.default.resolve(base);
  return { security_requirements: c.securityRequirements, security_schemes: Object.keys(c.securitySchemes ?? {}) };
}

// extcard: the security members and extensions of the extended card as
// a client built from the card reads it (getAgentCard calls
// GetExtendedAgentCard when the card declares one), with the API key key.
async function extcard(key) {
  const { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory, RestTransportFactory } = await import('@a2a-js/sdk/client');
  const fetchImpl = (url, init = {}) => {
    const headers = new Headers(init.headers);
    headers.set('X-API-Key', key);
    return fetch(url, { ...init, headers });
  };
  const options = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    preferredTransports: [binding],
    transports: [new JsonRpcTransportFactory({ fetchImpl }), new RestTransportFactory({ fetchImpl })],
  });
  const client = await new ClientFactory(options).createFromUrl(base);
  const c = await client.getAgentCard();
  return {
    security_requirements: c.securityRequirements,
    security_schemes: Object.keys(c.securitySchemes ?? {}),
    extensions: (c.capabilities?.extensions ?? []).map((e) => e.uri),
  };
}

const modes = { v1, v03, card, push: () => push(process.argv[5]), extcard: () => extcard(process.argv[5]) };

try {
  const summary = await modes[generation]();
  console.log(JSON.stringify(summary));
} catch (e) {
  console.error(e?.stack ?? String(e));
  process.exit(1);
}
