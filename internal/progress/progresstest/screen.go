// Package progresstest renders what a terminal shows of progress.Term's output, for tests.
package progresstest

// Screen returns the lines a terminal shows after out is written to it: a carriage return
// moves to the start of the line, ESC [K erases to its end, a newline starts the next line,
// other escape sequences (colours) take no room. The last element is the line the cursor is
// on, "" when out ends with a newline.
func Screen(out string) []string {
	var lines []string
	var cur []rune
	col := 0
	rs := []rune(out)
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; {
		case r == '\r':
			col = 0
		case r == '\n':
			lines = append(lines, string(cur))
			cur, col = nil, 0
		case r == '\x1b' && i+1 < len(rs) && rs[i+1] == '[':
			j := i + 2
			for j < len(rs) && !(rs[j] >= '@' && rs[j] <= '~') {
				j++
			}
			if j < len(rs) && rs[j] == 'K' {
				cur = cur[:col]
			}
			i = j
		default:
			if col < len(cur) {
				cur[col] = r
			} else {
				cur = append(cur, r)
			}
			col++
		}
	}
	return append(lines, string(cur))
}
