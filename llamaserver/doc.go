// Package llamaserver owns llama-server: its native HTTP API (the types of /completion,
// /tokenize, /props and /metrics, and a client of them) and, for the shim and the bench
// alike, the starting and supervising of its process.
package llamaserver
