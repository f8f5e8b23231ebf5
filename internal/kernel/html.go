package kernel

import (
	"strconv"
	"strings"
)

// HTMLToMarkdown converts the HTML that kernels emit (pandas tables above
// all) to markdown: tables become pipe tables, headings, list items and
// paragraphs keep their shape, every other tag is dropped, style and script
// contents are removed and entities are unescaped. It is a single linear scan
// without recursion; malformed HTML degrades to text, never to an error.
func HTMLToMarkdown(s string) string { return htmlToMarkdown(s, 1<<62) }

// htmlToMarkdown stops converting once the output exceeds limit bytes.
func htmlToMarkdown(s string, limit int) string {
	cv := &htmlConv{limit: limit}
	cv.run(s)
	return cv.result()
}

type htmlConv struct {
	out    strings.Builder
	limit  int
	tables []*htmlTable
	pre    int  // depth of <pre>
	nl     int  // trailing newlines already in out (for block spacing)
	space  bool // a space is pending before the next word
	list   []int
}

func (cv *htmlConv) table() *htmlTable {
	if len(cv.tables) == 0 {
		return nil
	}
	return cv.tables[len(cv.tables)-1]
}

// text appends character data (already unescaped) to where it belongs.
func (cv *htmlConv) text(s string) {
	if t := cv.table(); t != nil {
		if t.cell == nil {
			return // whitespace between table tags
		}
		appendCollapsed(&t.cell.text, s)
		return
	}
	if cv.pre > 0 {
		cv.out.WriteString(s)
		if strings.HasSuffix(s, "\n") {
			cv.nl = 1
		} else if s != "" {
			cv.nl = 0
		}
		return
	}
	if s == "" {
		return
	}
	if isSpace(s[0]) {
		cv.space = true
	}
	for i, w := range strings.Fields(s) {
		if (i > 0 || cv.space) && cv.nl == 0 && cv.out.Len() > 0 {
			cv.out.WriteByte(' ')
		}
		cv.out.WriteString(w)
		cv.nl = 0
	}
	cv.space = isSpace(s[len(s)-1])
}

func appendCollapsed(b *strings.Builder, s string) {
	for _, w := range strings.Fields(s) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' }

// block ensures out ends with n newlines (unless it is empty).
func (cv *htmlConv) block(n int) {
	if cv.table() != nil {
		if t := cv.table(); t.cell != nil {
			appendCollapsed(&t.cell.text, " ")
		}
		return
	}
	cv.space = false
	if cv.out.Len() == 0 {
		return
	}
	for cv.nl < n {
		cv.out.WriteByte('\n')
		cv.nl++
	}
}

func (cv *htmlConv) raw(s string) {
	if t := cv.table(); t != nil {
		if t.cell != nil {
			t.cell.text.WriteString(s)
		}
		return
	}
	if cv.space && cv.nl == 0 && cv.out.Len() > 0 {
		cv.out.WriteByte(' ')
	}
	cv.space = false
	cv.out.WriteString(s)
	cv.nl = 0
}

// start handles an opening tag; table structure is in html_table.go.
func (cv *htmlConv) start(name string, attrs string, selfClosing bool) {
	switch name {
	case "br":
		if t := cv.table(); t != nil {
			cv.text(" ")
			return
		}
		cv.out.WriteByte('\n')
		cv.nl++
		cv.space = false
	case "p", "div", "section", "article", "header", "footer", "blockquote", "figure", "details", "summary", "dl", "dt", "dd":
		cv.block(2)
	case "hr":
		cv.block(2)
		cv.raw("---")
		cv.block(2)
	case "h1", "h2", "h3", "h4", "h5", "h6":
		cv.block(2)
		cv.raw(strings.Repeat("#", int(name[1]-'0')) + " ")
		cv.space = false
	case "ul", "ol":
		cv.block(1)
		n := -1
		if name == "ol" {
			n = 1
		}
		if len(cv.list) < 100 {
			cv.list = append(cv.list, n)
		}
	case "li":
		cv.block(1)
		indent := ""
		if len(cv.list) > 1 {
			indent = strings.Repeat("  ", min(len(cv.list)-1, 8))
		}
		bullet := "- "
		if n := len(cv.list); n > 0 && cv.list[n-1] > 0 {
			bullet = strconv.Itoa(cv.list[n-1]) + ". "
			cv.list[n-1]++
		}
		cv.raw(indent + bullet)
		cv.space = false
	case "pre":
		cv.block(2)
		cv.raw("```\n")
		cv.nl = 1
		cv.pre++
	case "b", "strong":
		if !selfClosing {
			cv.raw("**")
		}
	case "table", "thead", "tbody", "tfoot", "tr", "td", "th":
		cv.startTableTag(name, attrs)
	}
}

// end handles a closing tag.
func (cv *htmlConv) end(name string) {
	switch name {
	case "p", "div", "section", "article", "header", "footer", "blockquote", "figure", "details", "summary", "dl", "dt", "dd",
		"h1", "h2", "h3", "h4", "h5", "h6":
		cv.block(2)
	case "ul", "ol":
		if len(cv.list) > 0 {
			cv.list = cv.list[:len(cv.list)-1]
		}
		cv.block(2)
	case "li":
		cv.block(1)
	case "pre":
		if cv.pre > 0 {
			cv.pre--
			if cv.nl == 0 {
				cv.out.WriteByte('\n')
			}
			cv.out.WriteString("```")
			cv.nl = 0
			cv.block(2)
		}
	case "b", "strong":
		cv.raw("**")
	case "table", "thead", "tr", "td", "th":
		cv.endTableTag(name)
	}
}

func (cv *htmlConv) result() string {
	// Close what was left open: tables and pre blocks.
	for len(cv.tables) > 0 {
		cv.end("table")
	}
	for cv.pre > 0 {
		cv.end("pre")
	}
	return strings.TrimSpace(cv.out.String())
}
