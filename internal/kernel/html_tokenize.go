package kernel

import (
	"html"
	"strings"
)

// attrValue finds name="value" (or 'value' or bare) in a tag's attribute text.
func attrValue(attrs, name string) (string, bool) {
	s := attrs
	for len(s) > 0 {
		s = strings.TrimLeft(s, " \t\r\n\f/")
		i := 0
		for i < len(s) && s[i] != '=' && !isSpace(s[i]) && s[i] != '/' {
			i++
		}
		key := strings.ToLower(s[:i])
		s = strings.TrimLeft(s[i:], " \t\r\n\f")
		val := ""
		if strings.HasPrefix(s, "=") {
			s = strings.TrimLeft(s[1:], " \t\r\n\f")
			if len(s) > 0 && (s[0] == '"' || s[0] == '\'') {
				q := s[0]
				j := strings.IndexByte(s[1:], q)
				if j < 0 {
					val, s = s[1:], ""
				} else {
					val, s = s[1:1+j], s[2+j:]
				}
			} else {
				j := 0
				for j < len(s) && !isSpace(s[j]) {
					j++
				}
				val, s = s[:j], s[j:]
			}
		}
		if key == name {
			return html.UnescapeString(val), true
		}
		if i == 0 && !strings.HasPrefix(s, "=") && len(s) > 0 {
			s = s[1:] // stray character: make progress
		}
	}
	return "", false
}

// run tokenizes s: text, <tag attrs>, </tag>, comments, doctype; the
// contents of <script> and <style> are skipped.
func (cv *htmlConv) run(s string) {
	for len(s) > 0 && cv.out.Len() <= cv.limit {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			cv.text(html.UnescapeString(s))
			return
		}
		if i > 0 {
			cv.text(html.UnescapeString(s[:i]))
			s = s[i:]
		}
		// s starts with '<'
		switch {
		case strings.HasPrefix(s, "<!--"):
			j := strings.Index(s[4:], "-->")
			if j < 0 {
				return
			}
			s = s[4+j+3:]
			continue
		case strings.HasPrefix(s, "<!") || strings.HasPrefix(s, "<?"):
			j := strings.IndexByte(s, '>')
			if j < 0 {
				return
			}
			s = s[j+1:]
			continue
		}
		closing := len(s) > 1 && s[1] == '/'
		k := 1
		if closing {
			k = 2
		}
		n := k
		for n < len(s) && isTagChar(s[n]) {
			n++
		}
		if n == k || !isLetter(s[k]) || (n < len(s) && !isSpace(s[n]) && s[n] != '>' && s[n] != '/') {
			cv.text("<") // not a tag: a literal '<'
			s = s[1:]
			continue
		}
		name := strings.ToLower(s[k:n])
		end := tagEnd(s, n)
		if end < 0 {
			return // unterminated tag at the end: drop it
		}
		attrs := s[n:end]
		s = s[end+1:]
		if closing {
			cv.end(name)
			continue
		}
		selfClosing := strings.HasSuffix(attrs, "/")
		if name == "script" || name == "style" {
			j := indexFold(s, "</"+name)
			if j < 0 {
				return
			}
			s = s[j:]
			continue
		}
		cv.start(name, attrs, selfClosing)
	}
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isTagChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == ':'
}

// tagEnd returns the index of the '>' closing a tag whose attributes start
// at i, honouring quoted attribute values.
func tagEnd(s string, i int) int {
	var q byte
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case q != 0:
			if c == q {
				q = 0
			}
		case c == '"' || c == '\'':
			q = c
		case c == '>':
			return i
		}
	}
	return -1
}

// indexFold is strings.Index ignoring ASCII case of substr (lower case).
func indexFold(s, substr string) int {
	for i := 0; i+len(substr) <= len(s); {
		j := strings.IndexByte(s[i:], '<')
		if j < 0 {
			return -1
		}
		i += j
		if i+len(substr) <= len(s) && strings.EqualFold(s[i:i+len(substr)], substr) {
			return i
		}
		i++
	}
	return -1
}
