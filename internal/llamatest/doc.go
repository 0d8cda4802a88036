// Package llamatest provides a real llama-server for tests, taken from Debian sid's llama.cpp-tools package and run on the host through sid's own dynamic loader and libraries.
package llamatest
