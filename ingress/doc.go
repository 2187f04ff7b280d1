// Package ingress is the stateless HTTP (and stdio) front door of the
// pipeline. It routes each request to its protocol's normalizer, enforces
// auth and limits, publishes the resulting e2a.Envelope on
// e2a.req.<pool>.<request_id> and answers only after JetStream acknowledged
// the write (durable accept). It never renders responses itself: streaming
// answers are handed to egress.
//
// Any number of ingress replicas can run behind a load balancer; every piece
// of state lives in JetStream (streams and KV).
package ingress
