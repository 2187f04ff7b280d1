package a2abridge

import "errors"

// ErrNoClientCredentials is returned by [ClientCredentialsOf] for a card
// whose security schemes offer no OAuth 2.0 client-credentials flow with a
// token URL.
var ErrNoClientCredentials = errors.New("a2abridge: the agent card offers no OAuth 2.0 client-credentials flow")

// ErrTokenURLRefused is returned by [ClientCredentials.Allowed] for a
// token endpoint the bridge may not send its OAuth client's credentials
// to.
var ErrTokenURLRefused = errors.New("a2abridge: the token endpoint is not on an allowed host")
