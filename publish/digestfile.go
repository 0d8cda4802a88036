package publish

import (
	"fmt"
	"strings"
)

// DigestLines renders successful results as "target<TAB>repo@digest" lines, in result order.
func DigestLines(results []Result) []byte {
	var b strings.Builder
	for _, r := range results {
		if r.Err == nil {
			fmt.Fprintf(&b, "%s\t%s\n", r.Target, r.Ref)
		}
	}
	return []byte(b.String())
}
