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
			if len(opts.AllowHosts) > 0 {
				log.Warn("--allow-host is for a shim on loopback; beyond it every Host is answered", "allow_host", opts.AllowHosts)
			}
		}
	}
}
