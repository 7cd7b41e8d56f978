package remote

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"time"
)

// conns are the connections one bucket's HTTP client has dialed, so that
// the bucket's Close can close them. The SDKs keep their keep-alive
// connections in pools a caller can't reach (azcore's is one per
// process; the S3 client's transport is wrapped where CloseIdleConnections
// does not reach it), and would hold them until the server or a 90 s
// idle timeout closed them: a process that opens and closes stores, as
// tests and `config check` do, would hold them, with two goroutines each.
type conns struct {
	mu     sync.Mutex
	open   map[*trackedConn]struct{}
	closed bool
}

func newConns() *conns { return &conns{open: map[*trackedConn]struct{}{}} }

// dialer wraps next (nil: net/http's default dialer) so that c tracks
// each connection it makes.
func (c *conns) dialer(next func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if next == nil {
		next = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{Conn: conn, c: c}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed {
			_ = conn.Close()
			return nil, net.ErrClosed
		}
		c.open[tc] = struct{}{}
		return tc, nil
	}
}

// closeAll closes every connection still open, and makes later dials
// fail: the bucket is closed.
func (c *conns) closeAll() {
	c.mu.Lock()
	c.closed = true
	open := c.open
	c.open = nil
	c.mu.Unlock()
	for tc := range open {
		_ = tc.Conn.Close()
	}
}

type trackedConn struct {
	net.Conn
	c *conns
}

func (t *trackedConn) Close() error {
	t.c.mu.Lock()
	delete(t.c.open, t)
	t.c.mu.Unlock()
	return t.Conn.Close()
}

// httpClient is a client of one bucket's own, whose connections c
// tracks, with azcore's default transport settings (which differ from
// net/http's by keeping up to 10 idle connections per host, not 2,
// refusing TLS below 1.2, and pinging an idle HTTP/2 connection).
func (c *conns) httpClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = c.dialer(nil)
	tr.MaxIdleConnsPerHost = 10
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	tr.HTTP2 = &http.HTTP2Config{SendPingTimeout: 10 * time.Second, PingTimeout: 5 * time.Second}
	return &http.Client{Transport: tr}
}
