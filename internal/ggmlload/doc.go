// Package ggmlload says what ggml's backend loader (ggml_backend_load_all) looks for at run
// time: the file names it dlopens, and the backend directory compiled into libggml.
package ggmlload
