package shim

import (
	"log/slog"
	"net"
)

// WarnBeyondLoopback warns when opts.Addr, where the shim is to listen, is reachable from
// beyond this machine, saying whether an API key guards it.
func WarnBeyondLoopback(log *slog.Logger, opts Options) {
	if host, _, _ := net.SplitHostPort(opts.Addr); host != "localhost" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			log.Warn("listening beyond loopback", "addr", opts.Addr, "api_key", opts.APIKey != "")
		}
	}
}
