// Package acptest holds what tests of ACP front doors share: a recording
// client for acp-go-sdk's client-side connection.
package acptest
