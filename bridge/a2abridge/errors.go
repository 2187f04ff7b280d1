package a2abridge

import (
	"errors"
	"fmt"
)

// ErrNoClientCredentials is returned by [ClientCredentialsOf] for a card
// whose security schemes offer no OAuth 2.0 client-credentials flow with a
// token URL.
var ErrNoClientCredentials = errors.New("a2abridge: the agent card offers no OAuth 2.0 client-credentials flow")

// ErrTokenURLRefused is returned by [ClientCredentials.Allowed] for a
// token endpoint the bridge may not send its OAuth client's credentials
// to.
var ErrTokenURLRefused = errors.New("a2abridge: the token endpoint is refused")

// ErrTokenHostNotAllowed is the [ErrTokenURLRefused] of a token endpoint
// on a host that is neither the agent's nor an allowed one.
var ErrTokenHostNotAllowed = fmt.Errorf("%w: not on the agent's host nor an allowed one", ErrTokenURLRefused)
