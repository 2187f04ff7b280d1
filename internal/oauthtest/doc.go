// Package oauthtest runs a real OAuth 2.0 authorization server for tests
// (github.com/go-oauth2/oauth2/v4, client-credentials grant, tokens in
// memory) on a loopback port: the token endpoint a bridge's upstream
// client gets its bearer tokens from (bridge.WithTokenSource,
// E2A_UPSTREAM_OAUTH_*), and the check an upstream in a test makes of
// them (Server.Require). It counts the tokens it issued, so tests see a
// token reused until it expires and asked for again after.
package oauthtest
