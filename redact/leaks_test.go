package redact_test

import (
	"testing"

	"github.com/e2a-pipeline/pipeline/redact"
)

// jwt is a signed JWT ({"alg":"HS256","typ":"JWT"}.{"sub":"1"}.sig).
const jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg"

// TestCredentialKeys: OAuth2/OIDC credentials that are no token_… key
// (RFC 7523's assertion and client_assertion, OIDC's id_token_hint, RFC
// 8693's subject_token and actor_token, a bare jwt), Django's and Java's
// session cookies glued in one word, and connection strings; and the keys
// near them that name no secret.
func TestCredentialKeys(t *testing.T) {
	for _, k := range []string{"jwt", "JWT", "user_jwt", "nats_jwt", "client_assertion", "clientAssertion", "assertion",
		"X-Goog-IAP-JWT-Assertion", "Cf-Access-Jwt-Assertion", "id_token_hint", "idTokenHint", "token_hint",
		"subject_token", "subjectToken", "actor_token", "sessionid", "SESSIONID", "jsessionid", "JSESSIONID",
		"PHPSESSID", "session_cookie", "Cookie", "Set-Cookie",
		"connection_string", "connectionString", "ConnectionStrings", "CONNECTIONSTRING", "AZURE_STORAGE_CONNECTION_STRING",
		"conn_str", "connStr", "dsn", "DSN", "SENTRY_DSN", "pg_dsn", "database_url", "DATABASE_URL", "databaseUrl",
		"SQLALCHEMY_DATABASE_URI", "db_url", "redis_url", "REDIS_URL", "redisUri", "mongodb_uri", "MONGO_URL",
		"postgres_url", "amqp_url", "broker_url", "CELERY_BROKER_URL"} {
		if !redact.IsSecretKey(k) {
			t.Errorf("IsSecretKey(%q) = false (words %q)", k, redact.Words(k))
		}
	}
	for _, k := range []string{"session_id", "sessionId", "SessionID", "sessionID", "assertion_count", "assertions",
		"jwt_ttl_seconds", "jwt_algorithm", "jwt_expires_in", "client_assertion_type", "subject_token_type",
		"actor_token_type", "requested_token_type", "token_type_hint", "login_hint", "password_hint", "dsn_count",
		"database_url_ref", "DATABASE_URL_FILE", "connection_string_name", "max_connections", "database",
		"redis_db", "url", "base_url", "auth_url"} {
		if redact.IsSecretKey(k) {
			t.Errorf("IsSecretKey(%q) = true (words %q)", k, redact.Words(k))
		}
	}
}

// TestCredentialValues: the values under those keys, in every place the
// key rules read (objects, name/value pairs, [name, value] pairs, command
// lines, header lines); the numbers of the keys near them are kept.
func TestCredentialValues(t *testing.T) {
	checkCases(t, []redactCase{
		{"oauth2 bodies", `{"grant_type":"urn:ietf:params:oauth:grant-type:token-exchange","subject_token":"S1",` +
			`"subject_token_type":"urn:ietf:params:oauth:token-type:jwt","actor_token":"A1","assertion":"A2",` +
			`"client_assertion":"C1","client_assertion_type":"urn:ietf:params:oauth:client-assertion-type:jwt-bearer",` +
			`"id_token_hint":"H1","login_hint":"bob","token_type_hint":"access_token"}`,
			`{"grant_type":"urn:ietf:params:oauth:grant-type:token-exchange","subject_token":"[redacted]",` +
				`"subject_token_type":"urn:ietf:params:oauth:token-type:jwt","actor_token":"[redacted]","assertion":"[redacted]",` +
				`"client_assertion":"[redacted]","client_assertion_type":"urn:ietf:params:oauth:client-assertion-type:jwt-bearer",` +
				`"id_token_hint":"[redacted]","login_hint":"bob","token_type_hint":"access_token"}`, 5},
		{"jwt keys", `{"jwt":"J1","nats":{"user_jwt":"J2"},"jwt_ttl_seconds":3600,"assertion_count":4,"session_id":"s1"}`,
			`{"jwt":"[redacted]","nats":{"user_jwt":"[redacted]"},"jwt_ttl_seconds":3600,"assertion_count":4,"session_id":"s1"}`, 2},
		{"a form", `["curl","-d","grant_type=x&client_assertion=C1&id_token_hint=H1"]`,
			`["curl","-d","grant_type=x&client_assertion=[redacted]&id_token_hint=[redacted]"]`, 2},
		{"session cookies", `{"sessionid":"c1","JSESSIONID":"c2","headers":{"Cookie":"sessionid=c3","Set-Cookie":"sessionid=c4; Path=/"},` +
			`"h":[["Set-Cookie","sessionid=c5; HttpOnly"]],"env":[{"name":"session_cookie","value":"c6"}],"args":["Cookie: sessionid=c7","sessionid=c8"]}`,
			`{"sessionid":"[redacted]","JSESSIONID":"[redacted]","headers":{"Cookie":"[redacted]","Set-Cookie":"[redacted]"},` +
				`"h":[["Set-Cookie","[redacted]"]],"env":[{"name":"session_cookie","value":"[redacted]"}],"args":["Cookie: [redacted]","sessionid=[redacted]"]}`, 8},
	})
}

// TestConnectionStrings: a connection string loses its secret parts (a
// URL's password and secret parameters, the secret fields of a key=value
// list), or is replaced whole when its shape is none of those; one without
// a secret is kept.
func TestConnectionStrings(t *testing.T) {
	checkCases(t, []redactCase{
		{"urls", `{"database_url":"postgres://app:P1@db:5432/app?sslmode=require","REDIS_URL":"redis://:P2@cache:6379/0",` +
			`"mongodb_uri":"mongodb+srv://u:P3@c.example.net/db","dsn":"mysql://u@h/db?password=P4","broker_url":"amqp://guest@mq//",` +
			`"redis_url":"redis://localhost:6379/0","jdbc":{"connection_string":"jdbc:sqlserver://h:1433;databaseName=d;user=u;password=P5"}}`,
			`{"database_url":"postgres://app:[redacted]@db:5432/app?sslmode=require","REDIS_URL":"redis://:[redacted]@cache:6379/0",` +
				`"mongodb_uri":"mongodb+srv://u:[redacted]@c.example.net/db","dsn":"mysql://[redacted]@h/db?password=[redacted]","broker_url":"amqp://[redacted]@mq//",` +
				`"redis_url":"redis://localhost:6379/0","jdbc":{"connection_string":"jdbc:sqlserver://h:1433;databaseName=d;user=u;password=[redacted]"}}`, 6},
		{"key value lists", `{"connectionString":"Server=tcp:s.database.windows.net,1433;Initial Catalog=db;User ID=u;Password=P1;Encrypt=True;",` +
			`"AZURE_STORAGE_CONNECTION_STRING":"DefaultEndpointsProtocol=https;AccountName=a;AccountKey=P2==;EndpointSuffix=core.windows.net",` +
			`"conn_str":"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=P3",` +
			`"odbc":{"dsn":"DSN=Sales;UID=u;PWD={P4;x}"},"pg_dsn":"host=db user=app password='P 5' dbname=app",` +
			`"ConnectionStrings":{"Default":"Data Source=h;Password=P6","Cache":"localhost:6379"}}`,
			`{"connectionString":"Server=tcp:s.database.windows.net,1433;Initial Catalog=db;User ID=u;Password=[redacted];Encrypt=True;",` +
				`"AZURE_STORAGE_CONNECTION_STRING":"DefaultEndpointsProtocol=https;AccountName=a;AccountKey=[redacted];EndpointSuffix=core.windows.net",` +
				`"conn_str":"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=[redacted]",` +
				`"odbc":{"dsn":"DSN=Sales;UID=u;PWD=[redacted]"},"pg_dsn":"host=db user=app password=[redacted] dbname=app",` +
				`"ConnectionStrings":{"Default":"Data Source=h;Password=[redacted]","Cache":"[redacted]"}}`, 7},
		{"other shapes whole", `{"dsn":"u:P1@tcp(127.0.0.1:3306)/db","database_url":"P2","DSN":42,"redis_url":true}`,
			`{"dsn":"[redacted]","database_url":"[redacted]","DSN":"[redacted]","redis_url":true}`, 3},
		{"pairs and lines", `{"env":[{"name":"DATABASE_URL","value":"postgres://u:P1@h/db"},{"name":"REDIS_URL","value":"redis://h:6379"}],` +
			`"h":[["DATABASE_URL","postgres://u:P2@h/db"]],"args":["DATABASE_URL=postgres://u:P3@h/db","--dsn","Server=h;Password=P4","--dsn=sqlite.db"]}`,
			`{"env":[{"name":"DATABASE_URL","value":"postgres://u:[redacted]@h/db"},{"name":"REDIS_URL","value":"redis://h:6379"}],` +
				`"h":[["DATABASE_URL","postgres://u:[redacted]@h/db"]],"args":["DATABASE_URL=postgres://u:[redacted]@h/db","--dsn","Server=h;Password=[redacted]","--dsn=[redacted]"]}`, 5},
		{"kept", `{"dsn_count":2,"database_url_ref":"vault:db","database":"app","max_connections":10}`,
			`{"dsn_count":2,"database_url_ref":"vault:db","database":"app","max_connections":10}`, 0},
	})
}

// TestCredentialShapes: a value that is wholly a JWT or an HTTP
// credential ("Bearer X", "Basic X") is one under any key; in a longer
// text (a message's content) nothing is rewritten.
func TestCredentialShapes(t *testing.T) {
	checkCases(t, []redactCase{
		{"whole values", `{"headers":{"X-Amzn-Oidc-Data":"` + jwt + `","X-Upstream":"Bearer abcdef0123456789"},` +
			`"h":[["X-Forwarded-User","Basic dXNlcjpwYXNz"]],"env":[{"name":"UPSTREAM","value":"bearer ghp_0123456789"}],` +
			`"list":["` + jwt + `"],"claims":"` + jwt + `"}`,
			`{"headers":{"X-Amzn-Oidc-Data":"[redacted]","X-Upstream":"Bearer [redacted]"},` +
				`"h":[["X-Forwarded-User","Basic [redacted]"]],"env":[{"name":"UPSTREAM","value":"bearer [redacted]"}],` +
				`"list":["[redacted]"],"claims":"[redacted]"}`, 6},
		{"free text kept", `{"text":"decode this: ` + jwt + `","parts":[{"text":"send Authorization: Bearer abcdef0123456789 please"}],` +
			`"a":"Bearer of bad news","b":"Bearer arms","c":"Basic realm=\"x\"","d":"eyJ not a token","e":"a.b.c","f":"eyJhbGciOi.x"}`,
			`{"text":"decode this: ` + jwt + `","parts":[{"text":"send Authorization: Bearer abcdef0123456789 please"}],` +
				`"a":"Bearer of bad news","b":"Bearer arms","c":"Basic realm=\"x\"","d":"eyJ not a token","e":"a.b.c","f":"eyJhbGciOi.x"}`, 0},
		{"references kept", `{"credentialRef":"` + jwt + `"}`, `{"credentialRef":"` + jwt + `"}`, 0},
	})
}
