// Package debfetch downloads and unpacks Debian packages from unstable for tests that need
// real binaries nobody here wrote, caching them under ~/.cache/llbuild-test.
package debfetch
