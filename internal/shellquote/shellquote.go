// Package shellquote writes arguments as a POSIX shell reads them back.
package shellquote

import "strings"

// Quote is s as a shell word: as it is when it holds only characters no shell treats specially
// (letters, digits and -_=./:,+@%), else in single quotes, a quote inside closing them, escaped,
// and opening them again.
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
