// Package hostport is the one rule for the host:port addresses Spillway's
// config takes: the brokers it dials (kafka.brokers) and the address its
// admin endpoint listens on (admin.listen). Config validation and the admin
// server both use it, so an address one accepts the other accepts too.
//
// The errors read after the address, as in `"localhost" is not host:port`.
package hostport

import (
	"errors"
	"fmt"
	"net"
	"strconv"
)

var errNotHostPort = errors.New("is not host:port")

// Dial checks an address to connect to: a host and a numeric port from 1 to
// 65535.
func Dial(addr string) error { return check(addr, false) }

// Listen checks an address to listen on. The host may be empty (":8080",
// all interfaces) and the port 0 (any free port).
func Listen(addr string) error { return check(addr, true) }

func check(addr string, listen bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errNotHostPort
	}
	if host == "" && !listen {
		return errors.New("has no host")
	}
	// A service name such as "http" would be looked up by the resolver:
	// only a number says which port is meant.
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || (n == 0 && !listen) {
		return fmt.Errorf("has an invalid port %q", port)
	}
	return nil
}
