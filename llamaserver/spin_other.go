//go:build !linux

package llamaserver

import (
	"net"
	"time"
)

// spinReadable polls only on Linux; elsewhere the read waits as usual.
func spinReadable(net.Conn, time.Duration) {}
