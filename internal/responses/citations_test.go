package responses

import "testing"

// mention finds a file by its path, its /mnt/data path, its relative path
// or its name, in that order, counting code points; unnamed: the end.
func TestMention(t *testing.T) {
	for _, c := range []struct {
		text, path string
		start, end int
		ok         bool
	}{
		{"see /workspace/a/b.csv", "/workspace/a/b.csv", 4, 22, true},
		{"ünïcode sandbox:/mnt/data/a/b.csv", "/workspace/a/b.csv", 16, 33, true},
		{"in a/b.csv", "/workspace/a/b.csv", 3, 10, true},
		{"the file b.csv", "/workspace/a/b.csv", 9, 14, true},
		{"nothing here ✓", "/workspace/a/b.csv", 14, 14, false},
	} {
		start, end, ok := mention(c.text, c.path)
		if start != c.start || end != c.end || ok != c.ok {
			t.Errorf("mention(%q, %q) = %d, %d, %v; want %d, %d, %v", c.text, c.path, start, end, ok, c.start, c.end, c.ok)
		}
	}
	if !hidden("/workspace/.cache/x") || !hidden("/workspace/.x") || hidden("/workspace/a.b/c") {
		t.Error("hidden")
	}
}
