// Package chaos holds the chaos suite: the whole pipeline on an in-process
// 3-node JetStream cluster (R3 streams), two agent pools and two egress
// processes, with one of each — and a NATS node — killed mid-stream while
// clients stream and resume.
package chaos
