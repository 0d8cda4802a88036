// Package debfetch finds real binaries nobody here wrote for preflight's tests: Debian sid's
// ggml CPU backends and llama-server, from the sysroot internal/llamatest downloads and caches.
package debfetch
