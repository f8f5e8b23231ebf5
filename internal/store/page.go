package store

// PageLimit is a usage or audit list's row limit: 1 to 1001 (a page of
// 1000 and one more to tell whether there are more), 1000 when unset.
// Every backend bounds its lists by it.
func PageLimit(n int) int {
	if n <= 0 || n > 1001 {
		return 1000
	}
	return n
}
