package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/a2abridge"
)

// oauthVars are the variables of the client-credentials grant that go
// together.
const oauthVars = "E2A_UPSTREAM_OAUTH_TOKEN_URL, E2A_UPSTREAM_OAUTH_CLIENT_ID and E2A_UPSTREAM_OAUTH_CLIENT_SECRET"

// tokenOption is the bridge's token source of the OAuth 2.0 client
// credentials grant that the E2A_UPSTREAM_OAUTH_* variables describe, nil
// when none is set. Its token endpoint is called over TLS that trusts the
// system's roots and E2A_UPSTREAM_TLS_CA's (tokenTLS: an identity provider
// with a public certificate serves an upstream on a private CA), without
// the upstream's client certificate, each token asked for within the
// connect and idle timeouts together (x/oauth2's second try with the
// client's credentials in the form, after a first that failed, included). Refused, naming the variables: one
// of the three without the others, a token endpoint that is not https
// (http on this machine only: the client secret goes there), and a token
// beside E2A_UPSTREAM_API_KEY or an Authorization header of
// E2A_UPSTREAM_HEADERS (each would be the calls' Authorization).
func (u UpstreamConfig) tokenOption(headers map[string]string) (bridge.ClientOption, error) {
	if u.OAuthTokenURL == "" && u.OAuthClientID == "" && u.OAuthClientSecret == "" {
		if u.OAuthScopes != "" || u.OAuthAudience != "" {
			return nil, fmt.Errorf("E2A_UPSTREAM_OAUTH_SCOPES or _AUDIENCE without %s", oauthVars)
		}
		return nil, nil
	}
	if u.OAuthTokenURL == "" || u.OAuthClientID == "" || u.OAuthClientSecret == "" {
		if u.Kind == upstreamA2A {
			return nil, fmt.Errorf("%s go together (the client-credentials grant needs all three; "+
				"for an A2A agent whose card names its token endpoint, the client's two are enough)", oauthVars)
		}
		return nil, fmt.Errorf("%s go together (the client-credentials grant needs all three)", oauthVars)
	}
	if err := tokenURLOK(u.OAuthTokenURL); err != nil {
		return nil, fmt.Errorf("E2A_UPSTREAM_OAUTH_TOKEN_URL: %w", err)
	}
	if err := oauthAlone(u, headers); err != nil {
		return nil, err
	}
	cfg := &clientcredentials.Config{ClientID: u.OAuthClientID, ClientSecret: u.OAuthClientSecret, TokenURL: u.OAuthTokenURL,
		Scopes: strings.FieldsFunc(u.OAuthScopes, func(r rune) bool { return r == ',' || r == ' ' })}
	if u.cardScopes != nil {
		cfg.Scopes = u.cardScopes
	}
	if u.OAuthAudience != "" {
		cfg.EndpointParams = url.Values{"audience": {u.OAuthAudience}}
	}
	tlsCfg, err := u.tokenTLS()
	if err != nil {
		return nil, err
	}
	d := &net.Dialer{Timeout: u.ConnectTimeout}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // the secret is not sent on to where a redirect points
	}, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, DialContext: d.DialContext, TLSClientConfig: tlsCfg,
		TLSHandshakeTimeout: u.ConnectTimeout}}
	// Each token is asked for with such a context; the bridge keeps it
	// until it expires or an upstream refuses it.
	base := context.WithValue(context.Background(), oauth2.HTTPClient, hc)
	within := u.ConnectTimeout + u.IdleTimeout
	return bridge.WithTokenSource(bridge.TokenSourceFunc(func() (*oauth2.Token, error) {
		ctx, cancel := context.WithTimeout(base, within)
		defer cancel()
		tok, err := cfg.Token(ctx)
		return tok, withoutSecret(err, cfg.ClientID, cfg.ClientSecret)
	})), nil
}

// withoutSecret is err with the client secret taken out of what a token
// endpoint answered (an *oauth2.RetrieveError's description, URI and
// body, which the bridge quotes): an endpoint may echo what it was sent,
// the secret as given, form-encoded, or in the Basic header of x/oauth2
// (id and secret form-encoded, then base64). The bridge scrubs tokens,
// never the secret, which it does not know.
func withoutSecret(err error, id, secret string) error {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || secret == "" {
		return err
	}
	forms := []string{secret, url.QueryEscape(secret),
		base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id) + ":" + url.QueryEscape(secret))),
		base64.StdEncoding.EncodeToString([]byte(id + ":" + secret))}
	scrub := func(s string) string {
		for _, f := range forms {
			s = strings.ReplaceAll(s, f, "[redacted]")
		}
		return s
	}
	c := *re
	c.ErrorDescription, c.ErrorURI, c.Body = scrub(re.ErrorDescription), scrub(re.ErrorURI), []byte(scrub(string(re.Body)))
	return &c
}

// oauthAlone refuses E2A_UPSTREAM_OAUTH_* beside other credentials that
// would be the calls' Authorization: E2A_UPSTREAM_API_KEY, or such a
// header of E2A_UPSTREAM_HEADERS (headers).
func oauthAlone(u UpstreamConfig, headers map[string]string) error {
	if u.APIKey != "" {
		return fmt.Errorf("E2A_UPSTREAM_API_KEY and E2A_UPSTREAM_OAUTH_* cannot go together: each would be the calls' Authorization")
	}
	for k := range headers {
		if http.CanonicalHeaderKey(k) == "Authorization" {
			return fmt.Errorf("an Authorization header in E2A_UPSTREAM_HEADERS and E2A_UPSTREAM_OAUTH_* cannot go together")
		}
	}
	return nil
}

// tokenFromCard is u with, for an A2A agent whose OAuth 2.0 client is
// given without its token endpoint (E2A_UPSTREAM_OAUTH_CLIENT_ID and
// _CLIENT_SECRET, no _TOKEN_URL), the token endpoint of the agent card's
// client-credentials flow (a2abridge.ClientCredentialsOf) and, unless
// E2A_UPSTREAM_OAUTH_SCOPES is set, the scopes the card's security
// requirement asks for; any other u as it is. The card is read without a
// token (the public card is public; one that asks for credentials is
// refused, naming the variable to set). The client secret goes to the
// token endpoint the card names, so it must be on the agent's host or one
// of E2A_UPSTREAM_ALLOWED_HOSTS, as the interfaces the bridge sends its
// credentials to (ClientCredentials.Allowed), and is held to the
// variable's rules (tokenURLOK); the start says where the
// tokens will come from (logged: the endpoint's URL without its query,
// the scopes; never the client's credentials).
func tokenFromCard(ctx context.Context, u UpstreamConfig, headers map[string]string, log *slog.Logger) (UpstreamConfig, error) {
	if u.Kind != upstreamA2A || u.OAuthTokenURL != "" || u.OAuthClientID == "" || u.OAuthClientSecret == "" {
		return u, nil
	}
	if err := oauthAlone(u, headers); err != nil {
		return u, err
	}
	plain := u
	plain.OAuthClientID, plain.OAuthClientSecret, plain.OAuthScopes, plain.OAuthAudience = "", "", "", ""
	client, err := upstreamClient(plain, headers)
	if err != nil {
		return u, err
	}
	log.Info("reading the agent card for its OAuth 2.0 token endpoint", "url", client.Location())
	rctx, cancel := context.WithTimeout(ctx, u.ConnectTimeout+u.IdleTimeout)
	defer cancel()
	card, err := a2abridge.ResolveCard(rctx, client)
	if be := (*bridge.Error)(nil); errors.As(err, &be) && be.Code == bridge.CodeAuth {
		return u, &startFailure{err: err, msg: fmt.Sprintf("the agent card at %s answered %d to a GET without a token, so its token "+
			"endpoint cannot be read from it: set E2A_UPSTREAM_OAUTH_TOKEN_URL (and E2A_UPSTREAM_OAUTH_SCOPES)", client.Location(), be.Status)}
	}
	if err != nil {
		return u, err
	}
	cc, err := a2abridge.ClientCredentialsOf(card)
	if err != nil {
		return u, &startFailure{err: err, msg: fmt.Sprintf("%s (%s): set E2A_UPSTREAM_OAUTH_TOKEN_URL",
			strings.TrimPrefix(err.Error(), "a2abridge: "), client.Location())}
	}
	if err := cc.Allowed(client, u.AllowedHosts); err != nil {
		advice := "set E2A_UPSTREAM_OAUTH_TOKEN_URL"
		if errors.Is(err, a2abridge.ErrTokenHostNotAllowed) {
			advice = "the client secret would go there: allow its host in E2A_UPSTREAM_ALLOWED_HOSTS, or " + advice
		}
		return u, &startFailure{err: err, msg: fmt.Sprintf("the token URL of the agent card's scheme %q (%s): %s; %s", cc.Scheme,
			client.Location(), strings.TrimPrefix(err.Error(), "a2abridge: "), advice)}
	}
	if err := tokenURLOK(cc.TokenURL); err != nil {
		return u, &startFailure{err: err, msg: fmt.Sprintf("the token URL of the agent card's scheme %q (%s): %v; "+
			"set E2A_UPSTREAM_OAUTH_TOKEN_URL", cc.Scheme, client.Location(), err)}
	}
	u.OAuthTokenURL = cc.TokenURL
	if u.OAuthScopes == "" {
		u.cardScopes = append([]string{}, cc.Scopes...)
	}
	shown, _ := url.Parse(cc.TokenURL)
	log.Info("OAuth 2.0 tokens from the agent card's token endpoint", "scheme", cc.Scheme,
		"token_url", (&url.URL{Scheme: shown.Scheme, Host: shown.Host, Path: shown.Path}).String(), "scopes", u.scopesSaid())
	return u, nil
}

// scopesSaid names the scopes the bridge asks tokens for, as its start
// and errors say it: those of E2A_UPSTREAM_OAUTH_SCOPES, or the agent
// card's (listed: they are no secret).
func (u UpstreamConfig) scopesSaid() string {
	if u.cardScopes == nil {
		return "E2A_UPSTREAM_OAUTH_SCOPES"
	}
	return fmt.Sprintf("the agent card's %q", u.cardScopes)
}

// tokenTLS is the token endpoint's TLS: the system's roots and those of
// E2A_UPSTREAM_TLS_CA, and no client certificate (nil without the
// variable: the system's roots).
func (u UpstreamConfig) tokenTLS() (*tls.Config, error) {
	if u.TLSCA == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(u.TLSCA)
	if err != nil {
		return nil, fmt.Errorf("E2A_UPSTREAM_TLS_CA: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("E2A_UPSTREAM_TLS_CA: %s holds no PEM certificate", u.TLSCA)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}, nil
}

// tokenURLOK refuses a token endpoint the client secret may not be sent
// to: not an absolute http(s) URL, or http to another machine.
func tokenURLOK(raw string) error {
	t, err := url.Parse(raw)
	switch {
	case err != nil || (t.Scheme != "https" && t.Scheme != "http") || t.Host == "":
		return fmt.Errorf("not an absolute https URL")
	case t.User != nil:
		return fmt.Errorf("user information in the URL (give the client's credentials in their variables)")
	case t.Scheme == "http" && !loopbackHost(t.Hostname()):
		return fmt.Errorf("http to %s: the client secret is sent there, so https (http only on this machine)", t.Hostname())
	}
	return nil
}

// loopbackHost reports a host name of this machine: localhost or a
// loopback address.
func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
