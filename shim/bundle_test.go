package shim

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestWarnBeyondLoopbackOnlyForAddressesOthersReach(t *testing.T) {
	tests := []struct {
		addr   string
		apiKey string
		want   string
	}{
		{"127.0.0.1:8080", "", ""},
		{"[::1]:8080", "", ""},
		{"localhost:8080", "", ""},
		{"0.0.0.0:8080", "k", "addr=0.0.0.0:8080 api_key=true"},
		{":8080", "", "addr=:8080 api_key=false"},
		{"192.168.1.2:8080", "", "addr=192.168.1.2:8080 api_key=false"},
	}
	for _, tt := range tests {
		var log bytes.Buffer
		WarnBeyondLoopback(slog.New(slog.NewTextHandler(&log, nil)), Options{Addr: tt.addr, APIKey: tt.apiKey})
		if tt.want == "" && log.Len() > 0 || tt.want != "" && !strings.Contains(log.String(), `msg="listening beyond loopback" `+tt.want) {
			t.Errorf("WarnBeyondLoopback(%s) logged %q, want %q", tt.addr, log.String(), tt.want)
		}
	}
}
