// Package pushtest holds the test helpers of push notifications shared
// by the packages that test them (push, ingress, internal/jsclient,
// cmd/e2a): a webhook receiver on loopback that records every POST (and
// answers a path with the status a test sets) and decodes its body in
// either generation of A2A, the push stage's consumer found idle (every
// stored response frame handled), and the signing helpers
// (an Ed25519 key file as e2a loads it, the served JWK Set, detached JWS
// verification with go-jose).
package pushtest
