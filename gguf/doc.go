// Package gguf reads and writes GGUF model files: it parses their metadata and tensor directory without touching tensor data, extracts the facts a bundle manifest records, and makes tiny random-weight models for tests.
package gguf
