// Package redact is the pipeline's one secret policy: which keys hold
// secrets, and how their values are replaced. The normalizer applies it to
// every envelope before anything is published (so nothing secret reaches
// E2A_REQUESTS, E2A_AUDIT, the KV buckets or an agent), the logger
// (internal/obs) to every attribute, and the console (egress/console) to
// everything it shows. It knows no protocol: what is protocol specific (the
// envelope's auth object, ACP MCP servers, A2A push configurations) is the
// normalizer's, which calls this package.
//
// # Which keys are secret
//
// A key is split into words ([Words]): at every character that is neither a
// letter nor a digit (snake_case, kebab-case, dotted.keys, spaces), at a
// lower-case → upper-case change (camelCase), before the last capital of a
// run followed by a lower-case letter (APIKey → API, Key; OAuthToken → O,
// Auth, Token), and between letters and digits (oauth2token → oauth, 2,
// token). Words are compared in lower case.
//
// A key is secret when some word, or some run of consecutive words, is in
// the word list, and no qualifier word follows the last such match:
//
//   - secret words: secret(s), password(s), passwd, pwd, passphrase, token,
//     credential(s), apikey(s), auth, authorization, cookie(s), bearer,
//     signature, nkey, privatekey, clientsecret, jwt, assertion (RFC
//     7523's and RFC 8693's assertion, client_assertion), sessionid and
//     sessid (Django's, Java's and PHP's session cookies); plus, glued in
//     one word, any word ending in token, secret, password, passwd,
//     passphrase, credential(s), apikey, cookie, authorization, jwt,
//     assertion, sessionid or sessid (accesstoken, xapikey, setcookie,
//     dbpassword, jsessionid, phpsessid);
//   - secret phrases (consecutive words): api key(s), private key(s),
//     secret key, session key, signing key, encryption key, master key,
//     access key, seed phrase, nats seed, subscription key and account key
//     (Azure's Ocp-Apim-Subscription-Key, Storage's AccountKey), and the
//     lists access tokens, refresh tokens, api tokens, session tokens,
//     and token hint (OIDC's id_token_hint is the ID token); a
//     phrase glued in one word is one too, as is any word ending in one
//     (secretkey, SECRETKEY, accesskey: Docker registry's S3 driver's
//     keys; awssecretkey), and a phrase's first word may end a longer
//     word, a run of capitals Words cannot split (XAPIKey → xapi, key;
//     OpenAIAPIKey → open, aiapi, key);
//   - connection strings: a key ending in dsn, connection string(s),
//     conn str(ing) (glued too: CONNECTIONSTRING), or in url or uri after
//     database, db, redis, mongo(db), postgres(ql), pg, mysql, amqp,
//     rabbitmq, broker, cache or sql (DATABASE_URL, redis_url,
//     SQLALCHEMY_DATABASE_URI, CELERY_BROKER_URL); [Policy.IsSecretKey]
//     says it is secret, while [Policy.Redact] replaces only the secret
//     parts of a string under it (below);
//   - words and phrases added by configuration ([Policy.AddWords];
//     E2A_SECRET_KEYS in cmd/e2a), each split like a key (a configured
//     phrase glued counts too: X-Vendor-Sig makes xvendorsig secret).
//
// Qualifier words after the match make the key name something about a
// secret rather than the secret: ref(s), reference(s) (credential_ref,
// api_key_ref, credentialRef: references, see below), name(s), type(s),
// kind, scheme(s), method(s), mode, format, count(s), number, num, size,
// length, len, limit(s), min, max, usage, budget, used, remaining,
// url, uri, endpoint, path, file, location, policy, provider, expires,
// expiry, expiration, ttl, required, enabled, present, valid, version,
// hint (but token hint is a phrase), scope(s), algorithm, alg
// (jwt_ttl_seconds, assertion_count, client_assertion_type,
// token_type_hint, dsn_count survive). (Not header: auth_header holds the
// header's value.) A key whose first word is max, min, num, total, stripped or
// redacted is a count, never a secret (max_token, stripped_secrets).
//
// Deliberate consequences (each is in the test table):
//
//   - plural "tokens" is not a secret word: max_tokens, input_tokens,
//     total_tokens, tokens are LLM counts; token_count, token_usage and
//     token_type survive through their qualifier; token, auth_token,
//     session_token, access_token, id_token, github_token are secret, and
//     so are the lists access_tokens, refresh_tokens, api_tokens.
//   - "session" alone is not a secret word: ACP sessionId, E2A session_id
//     and A2A contextId are ids that must survive. A session's secrets are
//     still caught by their other word: session_token, session_secret,
//     session_cookie, and the phrase session key; the one word sessionid
//     (SESSIONID, JSESSIONID) is a cookie's name, and secret.
//   - "key" alone is not secret (sort_key, cache_key, idempotency_key);
//     only the phrases above are. "seed" alone is not (an LLM sampling
//     seed); nkey, nats seed and seed phrase are.
//   - "auth" is a word: auth, auth_token, authToken, x-auth-token are
//     secret, while auth_method, auth_type, auth_scheme, auth_url survive,
//     and authority, author, authenticated, oauth are other words.
//   - an id after a secret word is not a qualifier: token_id, secret_id
//     and credential_id are redacted (Vault's secret_id is a credential).
//     Numbers are the exception for LLM tokens: under a key whose last
//     match is the word token followed only by id, ids, logprob(s)
//     (eos_token_id, stop_token_ids, prompt_token_ids, token_logprobs) or
//     preceded by per (cost_per_token, predicted_per_token_ms), a number
//     or an array of numbers is kept by [Policy.Redact] (vLLM takes
//     stop_token_ids), and so is a string that is only numbers separated
//     by commas, as a value or written in an array's string (an env value
//     "2"; --eos-token-id 2, --pad-token-id=0, EOS_TOKEN_ID=2, a form's or
//     a URL's eos_token_id=2, stop_token_ids=1,2), while any other string
//     or an object is still redacted (token=123456, --api-token 1 are); the
//     key alone ([Policy.IsSecretKey], a log attribute's key) is secret.
//   - "signature" is a secret word (x-hub-signature-256), but a thought
//     signature is not: Gemini's thought_signature must go back with the
//     next turn's tool calls, and so must the signature of an Anthropic
//     extended-thinking block, which [Policy.Redact] keeps in an object
//     whose "type" is "thinking" (or a stream's "signature_delta"), as
//     it keeps a "redacted_thinking" block's data; so are Bedrock
//     Converse's (a reasoningText's signature beside its text, a
//     ConverseStream reasoningContent delta's lone signature) and
//     OpenRouter's (in a reasoning_details entry, a "reasoning.text"'s
//     signature and a "reasoning.encrypted"'s data); a signature anywhere
//     else (a webhook's, beside another type) is redacted.
//
// # What is replaced
//
// [Policy.Redact] walks a decoded JSON value (map[string]any, []any) at
// every depth, in place:
//
//   - the scalar value (string or number) of a secret key is replaced by
//     [Marker]; booleans and nulls are kept (they carry no secret), and so
//     are the numbers of a key naming LLM tokens (above), in an object, a
//     name/value pair or a [name, value] pair;
//   - a connection string (a string under a connection string's key, in
//     each of those places and in the command-line and header-line rules
//     below; the string leaves of an object under one) loses its secret
//     parts only: a URL's ("postgres://app:[redacted]@db/app",
//     "jdbc:sqlserver://h;password=[redacted]") as the URL rule below
//     does; the values of the secret fields of a "name=value" list
//     separated by ';' ("Server=h;Password=[redacted];",
//     "AccountKey=[redacted]", "PWD=[redacted]" for "PWD={x;y}") or
//     white space (libpq's "host=h password=[redacted]"); anything else
//     ("user:pw@tcp(h)/db", a bare secret, a number) is replaced whole,
//     and one without a secret ("redis://cache:6379") is kept;
//   - a credential's shape: a string that is wholly a JWT (three or five
//     base64url segments, the first starting "eyJ") or an HTTP
//     credential ("Bearer X", "Basic X", X a token68 of 8 characters or
//     more) is replaced under any key that is no reference, in an object
//     or an array: the JWT whole, X after its scheme ("Bearer
//     [redacted]"). Only whole values: a text holding one (a message's
//     content, "decode this: eyJ…") is never rewritten, and so a JWT in
//     free text reaches the streams (the logger hides "Bearer X" in any
//     string it writes);
//   - an object or array under a secret key has every scalar leaf replaced,
//     at every depth ("auth": {"user": …, "password": …}), except:
//   - references: the value of a key whose last word is ref(s) or
//     reference(s) (credentialRef, api_key_ref, $ref) is kept, even inside
//     a secret object ({"auth": {"credentialRef": "vault:k", "user": …}}
//     keeps the reference and hides the user); it is still searched for
//     secret keys. (A2E workflow headers {"credentialRef": {…}, "prefix":
//     "Bearer "} keep their scheme prefix through the normalizer's
//     workflow adapter, which knows that shape.)
//   - name/value pairs: in an object with a string "name" or "key" and a
//     "value", the value is replaced when the name or the key is a secret
//     key ([{"name": "GITHUB_TOKEN", "value": …}], header lists, settings
//     lists [{"key": "openai_api_key", "name": "OpenAI", "value": …}]);
//   - command lines: in an array, an element "--flag" or "-flag" whose
//     flag is a secret key hides the element after it (["--token", X],
//     ["--api-key", X]) unless that element starts with "--"; "--flag=X"
//     and "NAME=X" elements whose flag or name is a secret key become
//     "--flag=[redacted]" / "NAME=[redacted]"; otherwise X is read as a
//     header line ("--header=Authorization: Bearer X") or as a form
//     ("user=bob&password=X", curl's -d: each "&name=value" whose name is
//     a secret key). A NAME holding white space or one of ":/?&#@" is
//     none. One-letter flags (-p) are ambiguous (port, print, password)
//     and never match unless the letter is configured;
//   - header lines: in an array, a string element "Name: X" (the form
//     ^\s*([A-Za-z0-9_-]+)\s*:\s*(.+)$, X running to the end of the
//     string) whose Name is a secret key becomes "Name: [redacted]"
//     (["--header", "Authorization: Bearer X"], mcp-remote's way to pass a
//     token; ["curl", "-H", "Cookie: session=X"]; "API_KEY: X");
//   - URLs: in every string the walk reaches outside a secret or a
//     reference (an object's value, an array's element, free text: a
//     message's content too), every "scheme://…" (up to white space, a
//     quote, '<' or '>') has its credentials replaced, the rest of the
//     text kept: the
//     password of its user information, or the user when there is no
//     password (postgresql://app:[redacted]@db/app, the Postgres MCP
//     server's argument; https://[redacted]@github.com/o/r.git), and the
//     value of every query or fragment parameter whose name is a secret
//     key, key or sig (?api_key=, ?key= for Google's API keys, ?sig= for
//     Azure's shared access signatures, #access_token=), a parameter
//     starting at each '?', '&' or '#' after the authority (so those of a
//     URL in another's query too). The path is kept: a webhook's secret
//     path is [URL]'s to hide where a URL is shown. Unlike a credential's
//     shape, this rule rewrites free text: a URL's password or signature
//     is a secret by its name wherever it is written (the normalizer
//     keeps the uri of a message's files whole: a presigned URL is how a
//     client hands its agent a file);
//   - [name, value] pairs: a two-element array whose first element is a
//     secret key name has its second element replaced like that key's value
//     ("headers": [["Authorization", "Bearer X"], …]); a flag ("--auth") or
//     a string holding white space, '=' or ':' is no key name, and a
//     reference name (credentialRef) keeps its value.
//
// The marker is "[redacted]" everywhere ([Marker]). [Replacer] lets a caller
// put a reference (a vault key) instead of the marker.
//
// [Default] is the process's policy: cmd/e2a adds E2A_SECRET_KEYS to it at
// start-up, and the package functions ([IsSecretKey], [Redact]) use it. A
// [Policy] is safe for concurrent use; AddWords may run while others match.
package redact
