package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/pki"
	"github.com/outpost-edge/outpost/controlplane/version"
)

// Errors of this package. Errors the server sends are *api.StatusError,
// so api.IsNotFound and friends work on them.
var (
	// ErrNoServer is a configuration without a server URL.
	ErrNoServer = errors.New("no server configured")
	// ErrNoCA is a client configuration without the cluster CA's
	// certificate (certificate-authority-data).
	ErrNoCA = errors.New("the client configuration holds no cluster CA certificate")
	// ErrNoConfig is a named configuration file that does not exist.
	ErrNoConfig = errors.New("no client configuration")
	// ErrBadServer is a server URL that is not http(s)://host[:port].
	ErrBadServer = errors.New("invalid server URL")
	// ErrPlainHTTP is an http:// server URL without Insecure: tokens
	// would cross the network in clear text.
	ErrPlainHTTP = errors.New("refusing to send credentials over plain http without --insecure")
	// ErrUnreachable is a request that got no HTTP reply at all.
	ErrUnreachable = errors.New("cannot reach the server")
	// ErrBadReply is a reply body the client cannot read.
	ErrBadReply = errors.New("unreadable reply from the server")
)

// Client talks to the outpost HTTP API. It is safe for concurrent use; one
// Client should be shared, so that its connections are reused.
type Client struct {
	// eps are the servers, shared by copies (WithToken).
	eps       *endpoints
	insecure  bool
	hc        *http.Client
	token     string
	namespace string
	timeout   time.Duration
	userAgent string
	onWarning func(string)
	caData    []byte
}

// New checks cfg and builds a client. It does not contact the server.
func New(cfg Config) (*Client, error) {
	if cfg.Server == "" {
		return nil, ErrNoServer
	}
	u, err := parseServer(cfg.Server, cfg.Insecure)
	if err != nil {
		return nil, err
	}
	eps := &endpoints{list: []*endpoint{{base: u}}, now: time.Now}
	for _, srv := range cfg.Servers {
		o, err := parseServer(srv, cfg.Insecure)
		if err != nil {
			return nil, fmt.Errorf("servers: %w", err)
		}
		if o.Scheme != u.Scheme {
			return nil, fmt.Errorf("%w %q: every server must use the scheme of %s", ErrBadServer, srv, cfg.Server)
		}
		if !slices.ContainsFunc(eps.list, func(ep *endpoint) bool { return ep.base.String() == o.String() }) {
			eps.list = append(eps.list, &endpoint{base: o})
		}
	}
	var tlsCfg *tls.Config
	if u.Scheme == "https" {
		switch {
		case cfg.TLS != nil:
			tlsCfg = cfg.TLS.Clone()
		case len(cfg.CAData) > 0:
			tlsCfg, err = pki.ClientTLSConfig(cfg.CAData)
			if err != nil {
				return nil, fmt.Errorf("certificate-authority-data: %w", err)
			}
		default:
			tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
	}
	ns := cfg.Namespace
	if ns == "" {
		ns = "default"
	}
	// Controllers and agents keep many requests and watches in flight at
	// once; the default of two idle connections per host would make most
	// of them dial afresh.
	tr := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		TLSClientConfig:       tlsCfg,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &Client{
		eps:       eps,
		insecure:  cfg.Insecure,
		hc:        &http.Client{Transport: tr},
		token:     cfg.Token,
		namespace: ns,
		timeout:   cfg.Timeout,
		userAgent: "outpost/" + version.Version,
		caData:    cfg.CAData,
	}, nil
}

// CAPin is the pin (pki.Hash) of the cluster CA the client trusts, for a
// join string; ErrNoCA when its configuration names no CA.
func (c *Client) CAPin() (string, error) {
	block, _ := pem.Decode(c.caData)
	if block == nil {
		return "", ErrNoCA
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoCA, err)
	}
	return pki.Hash(cert), nil
}

// Namespace is the namespace requests use when they name none.
func (c *Client) Namespace() string { return c.namespace }

// Server is the base URL the client talks to now.
func (c *Client) Server() string { return c.eps.current().String() }

// SetWarningHandler makes the client call fn with the text of every
// warning header of every reply, raw requests and watches included. The
// CLI prints them; without a handler they are only returned by the calls
// that return api.Warnings. Set it before the client is shared.
func (c *Client) SetWarningHandler(fn func(text string)) { c.onWarning = fn }

// WithToken returns a client that sends token instead of c's and shares
// c's connections, settings and warning handler. Simulated agents and
// tests act as thousands of identities without a TLS connection each.
func (c *Client) WithToken(token string) *Client {
	cp := *c
	cp.token = token
	return &cp
}

// Do sends one request and returns the reply body and headers. path is an
// absolute API path ("/api/v1/namespaces/default/pods"), body is JSON or
// nil. A reply outside 2xx is returned as an *api.StatusError.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body []byte) ([]byte, http.Header, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	resp, err := c.send(ctx, method, path, query, body)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := readReply(resp)
	if err != nil {
		return nil, resp.Header, c.transportError(ctx, method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, resp.Header, ErrorFromReply(resp.StatusCode, data)
	}
	return data, resp.Header, nil
}

// readReply reads a reply's body whole. A length the server states is
// read into one buffer of that size, up to a bound, where io.ReadAll would
// grow one by copying (a third of a small write's allocations); a reply
// that ends short of its stated length is an error, as net/http reports it.
func readReply(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n > 0 && n <= maxSizedReply {
		data := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, data); err != nil {
			return nil, err
		}
		return data, nil
	}
	return io.ReadAll(resp.Body)
}

// maxSizedReply bounds what readReply allocates on a server's word alone.
const maxSizedReply = 4 << 20

// send issues the request and reports warnings; the caller owns the body.
// A non-2xx reply is returned as a response, not an error. A server that
// does not answer, or answers 503, is passed over for the next one of
// the client's servers when repeating the request is safe (retryable).
func (c *Client) send(ctx context.Context, method, path string, query url.Values, body []byte) (*http.Response, error) {
	var (
		tried []*endpoint
		// last is the previous server's 503, kept in case no server is
		// left to try; closed when another reply is returned.
		lastRes *http.Response
		lastErr error
	)
	defer func() { drain(lastRes) }()
	for {
		ep := c.eps.pick(tried)
		if ep == nil {
			// SetServers shrank the list under this request: every
			// server left was tried.
			res, err := lastRes, lastErr
			lastRes = nil
			return res, err
		}
		tried = append(tried, ep)
		var rd io.Reader
		ct := ""
		if body != nil {
			rd, ct = bytes.NewReader(body), "application/json"
		}
		resp, err := c.sendTo(ctx, ep, method, path, query, rd, int64(len(body)), ct)
		if ctx.Err() != nil {
			c.outOfTime(ctx, ep, err)
			return resp, err
		}
		if err == nil && resp.StatusCode != http.StatusServiceUnavailable {
			c.eps.answered(ep)
			return resp, nil
		}
		c.eps.failed(ep)
		code := 0
		if resp != nil {
			code = resp.StatusCode
		}
		if len(tried) >= c.eps.size() || !retryable(method, err, code) {
			return resp, err
		}
		drain(lastRes)
		lastRes, lastErr = resp, err
	}
}

// outOfTime records a server that gave no answer within the caller's
// deadline as failed: a server whose link is cut (packets dropped, no
// reset) holds a request until then, and a client that stayed with it
// would spend every later request the same way (an agent's heartbeats,
// each bounded by its own deadline, never got to another server). A
// request the caller cancelled says nothing of the server.
func (c *Client) outOfTime(ctx context.Context, ep *endpoint, err error) {
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		c.eps.failed(ep)
	}
}

// drain reads a little of a reply that will not be used and closes it, so
// that its connection can be reused; nil is a no-op.
func drain(resp *http.Response) {
	if resp == nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
}

// sendBody is send with a body read as it is sent: size bytes (-1 or 0:
// unknown, sent chunked) of contentType; nil for none. It cannot be
// repeated, so it goes to one server only.
func (c *Client) sendBody(ctx context.Context, method, path string, query url.Values, body io.Reader, size int64, contentType string) (*http.Response, error) {
	ep := c.eps.pick(nil)
	resp, err := c.sendTo(ctx, ep, method, path, query, body, size, contentType)
	switch {
	case ctx.Err() != nil:
		c.outOfTime(ctx, ep, err)
	case err != nil || resp.StatusCode == http.StatusServiceUnavailable:
		c.eps.failed(ep)
	default:
		c.eps.answered(ep)
	}
	return resp, err
}

// sendTo sends one request to ep.
func (c *Client) sendTo(ctx context.Context, ep *endpoint, method, path string, query url.Values, body io.Reader, size int64, contentType string) (*http.Response, error) {
	// path arrives escaped (PathFor escapes names); URL wants both forms.
	u := *ep.base
	u.RawPath = ep.base.EscapedPath() + path
	unescaped, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return nil, fmt.Errorf("request path %q: %w", path, err)
	}
	u.Path = unescaped
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	if body == nil {
		body = http.NoBody
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("build request %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if body != http.NoBody {
		req.ContentLength = size
		if size == 0 {
			req.ContentLength = -1
		}
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.transportErrorAt(ctx, ep.base.Host, method, path, err)
	}
	if c.onWarning != nil {
		for _, w := range ParseWarnings(resp.Header) {
			c.onWarning(w)
		}
	}
	return resp, nil
}

// transportError keeps a cancelled or timed-out context recognisable and
// marks everything else as an unreachable server.
func (c *Client) transportError(ctx context.Context, method, path string, err error) error {
	return c.transportErrorAt(ctx, c.eps.current().Host, method, path, err)
}

func (c *Client) transportErrorAt(ctx context.Context, host, method, path string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("%s %s: %w", method, path, ctxErr)
	}
	return fmt.Errorf("%w at %s: %w", ErrUnreachable, host, err)
}

// ErrorFromReply turns a non-2xx reply into an *api.StatusError: the
// server's Status when the body is one, else a Status made from the HTTP
// code and the body's text (a proxy's error page, a plain-text reply).
func ErrorFromReply(code int, body []byte) *api.StatusError {
	var st api.Status
	if err := json.Unmarshal(body, &st); err == nil && (st.Kind == "Status" || st.Message != "" || st.Reason != "") {
		if st.Code == 0 {
			st.Code = int32(code)
		}
		if st.Reason == "" {
			st.Reason = reasonForCode(int(st.Code))
		}
		if st.Message == "" {
			st.Message = http.StatusText(int(st.Code))
		}
		if st.Status == "" {
			st.Status = "Failure"
		}
		return &api.StatusError{Status: st}
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 1024 {
		msg = msg[:1024] + "..."
	}
	if msg == "" {
		msg = http.StatusText(code)
	}
	if msg == "" {
		msg = "HTTP status " + strconv.Itoa(code)
	}
	return &api.StatusError{Status: api.Status{
		TypeMeta: api.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   "Failure",
		Code:     int32(code),
		Reason:   reasonForCode(code),
		Message:  msg,
	}}
}

// reasonForCode guesses the Status reason of a reply that carries none,
// so that api.IsNotFound and the like also work through proxies.
func reasonForCode(code int) string {
	switch code {
	case http.StatusBadRequest:
		return api.ReasonBadRequest
	case http.StatusUnauthorized:
		return api.ReasonUnauthorized
	case http.StatusForbidden:
		return api.ReasonForbidden
	case http.StatusNotFound:
		return api.ReasonNotFound
	case http.StatusMethodNotAllowed:
		return api.ReasonMethodNotAllowed
	case http.StatusConflict:
		return api.ReasonConflict
	case http.StatusGone:
		return api.ReasonGone
	case http.StatusRequestEntityTooLarge:
		return api.ReasonRequestTooLarge
	case http.StatusUnsupportedMediaType:
		return api.ReasonUnsupportedMedia
	case http.StatusUnprocessableEntity:
		return api.ReasonInvalid
	case http.StatusTooManyRequests:
		return api.ReasonTooManyRequests
	case http.StatusServiceUnavailable:
		return api.ReasonServiceUnavailable
	case http.StatusGatewayTimeout:
		return api.ReasonTimeout
	}
	if code >= 500 {
		return api.ReasonInternalError
	}
	return ""
}

// ParseWarnings returns the texts of the `Warning: 299 - "text"` headers of
// a reply, in order. Values that do not follow that form are returned
// as they are rather than dropped: a warning is for a human to read.
func ParseWarnings(h http.Header) []string {
	vals := h.Values("Warning")
	if len(vals) == 0 {
		return nil
	}
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		for v = strings.TrimSpace(v); v != ""; v = strings.TrimSpace(v) {
			text, rest, ok := parseWarning(v)
			if !ok {
				out = append(out, v)
				break
			}
			out = append(out, text)
			v = strings.TrimPrefix(strings.TrimSpace(rest), ",")
		}
	}
	return out
}

// parseWarning reads one `code agent "text"[ "date"]` element of a Warning
// header (RFC 7234 section 5.5) and returns its text and what follows it.
func parseWarning(v string) (text, rest string, ok bool) {
	code, after, found := strings.Cut(v, " ")
	if !found || len(code) != 3 {
		return "", "", false
	}
	if _, err := strconv.Atoi(code); err != nil {
		return "", "", false
	}
	_, after, found = strings.Cut(strings.TrimLeft(after, " "), " ")
	if !found {
		return "", "", false
	}
	after = strings.TrimLeft(after, " ")
	text, rest, ok = readQuoted(after)
	if !ok {
		return "", "", false
	}
	// An optional warn-date, also quoted, may follow.
	if r := strings.TrimLeft(rest, " "); strings.HasPrefix(r, `"`) {
		if _, r2, ok2 := readQuoted(r); ok2 {
			rest = r2
		}
	}
	return text, rest, true
}

// readQuoted reads a quoted-string with backslash escapes.
func readQuoted(s string) (text, rest string, ok bool) {
	if !strings.HasPrefix(s, `"`) {
		return "", "", false
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
		case '"':
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", false
}
