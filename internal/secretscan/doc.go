// Package secretscan holds only a test: it puts known secrets wherever a
// crawl meets credentials (a URL's userinfo and query, Authorization and
// Cookie headers, a proxy's password, a session's header, token and
// cookies, the console's token, a refusing site echoing them back) and
// encodes every exported value of the module that may carry them with
// encoding/json, fmt and slog, looking for the secrets in the output.
package secretscan
