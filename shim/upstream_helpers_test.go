package shim

import (
	"context"
	"net/http"
)

// Tests and benchmarks reach llama-server past the shim's translation with these.

// do sends a raw request on the shim's client of llama-server; the caller closes the body.
func (u *upstream) do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	return u.ls.Send(ctx, method, path, body)
}

// postJSON posts in to path and decodes the answer into out, failures as the shim's.
func (u *upstream) postJSON(ctx context.Context, path string, in, out any) error {
	return upstreamFailure(ctx, u.ls.PostJSON(ctx, path, in, out))
}

// getJSON decodes GET path into out, failures as the shim's.
func (u *upstream) getJSON(ctx context.Context, path string, out any) error {
	return upstreamFailure(ctx, u.ls.GetJSON(ctx, path, out))
}
