// Package auth guards the HTTP services: bearer tokens with read and write scopes for
// the public API, a separate internal token for /api/v1/internal/* (worker-internal
// and master-to-worker calls), optional TLS, and the loopback rule of `lancectx serve`.
//
// Tokens come from a JSON file (--api-tokens-file, LANCECTX_API_TOKENS_FILE):
//
//	{
//	  "tokens": [
//	    {"name": "trainer",   "token": "…", "scopes": ["read", "write"]},
//	    {"name": "dashboard", "token": "…", "scopes": ["read"]}
//	  ],
//	  "internal_token": "…"
//	}
//
// "internal_token_file" (a path, relative to the tokens file's directory) may replace
// "internal_token". Only SHA-256 digests of the tokens are kept after loading, and a
// presented token is hashed and compared against every digest with
// crypto/subtle, so the time a lookup takes does not depend on which token (if any)
// matched, nor on how much of it matched.
//
// The middleware (Authenticator.Wrap) answers 401 with WWW-Authenticate: Bearer for a
// missing or unknown token and 403 for a known token without the scope a request
// needs, both with the JSON error envelope of package api: GET and HEAD need read
// (and POST /api/v1/generic/{name}/batch-get, a read whose ids are a body, and the
// context stores' POST .../search and .../retrieve, reads whose query is a body), every other
// method write, /api/v1/internal/* the internal token, which in turn
// opens nothing else but /api/v1/health and /metrics. Those two are open unless
// ProtectHealthAndMetrics is set.
package auth
