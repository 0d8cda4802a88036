// Package recipes describes what llbuild builds: the source commit, configure arguments,
// build targets and outputs of llama-server and of the llama-cpp-python wheel.
package recipes
