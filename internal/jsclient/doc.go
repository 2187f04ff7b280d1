// Package jsclient drives the pipeline with the official A2A JavaScript
// SDK's clients, as their users run them: @a2a-js/sdk 1.x (A2A v1.0, over
// JSON-RPC and HTTP+JSON) and 0.3.x (A2A v0.3), pinned in package-lock.json
// and run by client.mjs under Node.js (node ≥ 20). The test installs the
// pinned packages with `npm ci` when node_modules is missing (.ci/run does
// it first). Without node the test is skipped, except under CI=true (which
// .ci/run sets), where it fails.
//
// server.mjs, beside client.mjs, is the other side: an A2A agent on the
// same pinned SDK's server, that package internal/jsupstream starts as an
// upstream for the A2A bridge's tests.
package jsclient
