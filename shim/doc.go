// Package shim serves the OpenAI-compatible completion and logprob contract (legacy logprobs, echo with exact prompt-token logprobs, streaming, remote tokenizer endpoints) in front of a supervised, unmodified llama-server.
package shim
