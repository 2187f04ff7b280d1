// The smallest agent behind the pipeline, in Node: an HTTP service that reads
// the E2A envelope and answers E2A frames as NDJSON. No dependency.
//   node examples/httpagent/agent.mjs 8002 &
//   e2a agent --pool js --http http://127.0.0.1:8002/
import http from 'node:http';

const server = http.createServer((req, res) => {
  if (req.method !== 'POST') return res.writeHead(405, {Allow: 'POST'}).end(); // e2a agent's start check GETs
  let body = '';
  req.setEncoding('utf8'); // a character split between two reads stays whole
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    let p;
    try { p = JSON.parse(body).params ?? {}; } catch { return res.writeHead(400).end('not JSON'); }
    const prompt = (Array.isArray(p.prompt) ? p.prompt : []).filter((b) => b?.type === 'text').map((b) => String(b.text ?? '')); // ACP
    const text = typeof p.text === 'string' ? p.text : prompt.join(''); // A2A and E2A: params.text
    const frame = (kind, b) => JSON.stringify({response_kind: kind, body: b}) + '\n';
    res.writeHead(200, {'Content-Type': 'application/x-ndjson'});
    for (const word of ('Node heard: ' + text).split(' ')) res.write(frame('e2a.chunk', {delta_kind: 'text', delta: word + ' '}));
    res.end(frame('e2a.complete', {result: {words: text.split(/\s+/).filter(Boolean).length}}));
  });
});
server.listen(Number(process.argv[2] ?? 8002), '127.0.0.1', () => console.log('listening on', server.address().port));
