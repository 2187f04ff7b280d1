// Package deploy holds no production code: its tests check the deployment
// files of this folder (the NATS cluster configuration against real
// nats-server processes, the Kubernetes manifests against the API types,
// the Grafana dashboard against the metrics the code registers).
package deploy
