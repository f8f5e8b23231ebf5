package kernel

import (
	"html"
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

// maxTableCells bounds the grid a table expands to (colspan × rowspan can
// amplify a short input); a larger table is rendered without spans.
const maxTableCells = 1 << 20

type htmlConv struct {
	out    strings.Builder
	limit  int
	tables []*htmlTable
	pre    int  // depth of <pre>
	nl     int  // trailing newlines already in out (for block spacing)
	space  bool // a space is pending before the next word
	list   []int
}

type htmlCell struct {
	text             strings.Builder
	header           bool
	colspan, rowspan int
}

type htmlTable struct {
	rows     [][]*htmlCell
	headRows int // rows that came from <thead>
	inHead   bool
	inRow    bool
	cell     *htmlCell
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
	case "table":
		if cv.table() == nil {
			cv.block(2)
		}
		if len(cv.tables) < 8 {
			cv.tables = append(cv.tables, &htmlTable{})
		}
	case "thead":
		if t := cv.table(); t != nil {
			t.inHead = true
		}
	case "tbody", "tfoot":
		if t := cv.table(); t != nil {
			t.inHead = false
		}
	case "tr":
		if t := cv.table(); t != nil {
			t.endRow()
			t.rows = append(t.rows, nil)
			t.inRow = true
			if t.inHead {
				t.headRows = len(t.rows)
			}
		}
	case "td", "th":
		if t := cv.table(); t != nil {
			if !t.inRow {
				t.rows = append(t.rows, nil)
				t.inRow = true
			}
			c := &htmlCell{header: name == "th", colspan: spanAttr(attrs, "colspan"), rowspan: spanAttr(attrs, "rowspan")}
			t.cell = c
			t.rows[len(t.rows)-1] = append(t.rows[len(t.rows)-1], c)
		}
	}
}

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
	case "td", "th":
		if t := cv.table(); t != nil {
			t.cell = nil
		}
	case "tr":
		if t := cv.table(); t != nil {
			t.endRow()
		}
	case "thead":
		if t := cv.table(); t != nil {
			t.inHead = false
		}
	case "table":
		if t := cv.table(); t != nil {
			cv.tables = cv.tables[:len(cv.tables)-1]
			md := t.markdown()
			if outer := cv.table(); outer != nil {
				if outer.cell != nil {
					appendCollapsed(&outer.cell.text, md)
				}
				return
			}
			cv.block(2)
			cv.out.WriteString(md)
			cv.nl = 0
			cv.block(2)
		}
	}
}

func (t *htmlTable) endRow() {
	t.cell = nil
	t.inRow = false
}

func spanAttr(attrs, name string) int {
	v, ok := attrValue(attrs, name)
	if !ok {
		return 1
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 {
		return 1
	}
	return min(n, 1000)
}

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

// markdown renders the table as a pipe table: header rows (from <thead>, or
// leading rows of <th> cells, or else the first row) are joined per column.
func (t *htmlTable) markdown() string {
	rows := t.rows[:0:0]
	for _, r := range t.rows {
		if len(r) > 0 {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return ""
	}
	headRows := t.headRows
	if headRows == 0 {
		for _, r := range rows {
			allTH := true
			for _, c := range r {
				allTH = allTH && c.header
			}
			if !allTH {
				break
			}
			headRows++
		}
	}
	// Expand spans into a grid.
	cells := 0
	for _, r := range rows {
		for _, c := range r {
			cells += c.colspan * c.rowspan
		}
	}
	spans := cells <= maxTableCells
	grid := make([][]string, 0, len(rows))
	var carry []int // per column: rows still covered by a rowspan from above
	for ri, r := range rows {
		var row []string
		next := make([]int, len(carry))
		col := 0
		skipCovered := func() {
			for col < len(carry) && carry[col] > 0 {
				setCell(&row, col, "")
				next[col] = carry[col] - 1
				col++
			}
		}
		for _, c := range r {
			skipCovered()
			txt := mdCell(c.text.String())
			cs, rs := 1, 1
			if spans {
				cs, rs = c.colspan, c.rowspan
			}
			for dc := 0; dc < cs; dc++ {
				v := ""
				if dc == 0 || ri < headRows {
					v = txt // header cells spanning columns label every column
				}
				setCell(&row, col+dc, v)
				if rs > 1 {
					for len(next) <= col+dc {
						next = append(next, 0)
					}
					next[col+dc] = rs - 1
				}
			}
			col += cs
		}
		for ; col < len(carry); col++ {
			if carry[col] > 0 {
				setCell(&row, col, "")
				next[col] = carry[col] - 1
			}
		}
		grid = append(grid, row)
		carry = next
	}
	width := 0
	for _, r := range grid {
		width = max(width, len(r))
	}
	if width == 0 {
		return ""
	}
	if headRows == 0 {
		headRows = 1
	}
	headRows = min(headRows, len(grid))
	head := make([]string, width)
	for _, r := range grid[:headRows] {
		for i := range width {
			v := ""
			if i < len(r) {
				v = r[i]
			}
			if v != "" && head[i] != v {
				if head[i] != "" {
					head[i] += " / "
				}
				head[i] += v
			}
		}
	}
	var b strings.Builder
	writeRow := func(r []string) {
		b.WriteByte('|')
		for i := range width {
			v := ""
			if i < len(r) {
				v = r[i]
			}
			b.WriteByte(' ')
			b.WriteString(v)
			b.WriteString(" |")
		}
		b.WriteByte('\n')
	}
	writeRow(head)
	b.WriteByte('|')
	for range width {
		b.WriteString(" --- |")
	}
	b.WriteByte('\n')
	for _, r := range grid[headRows:] {
		writeRow(r)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func setCell(row *[]string, i int, v string) {
	for len(*row) <= i {
		*row = append(*row, "")
	}
	(*row)[i] = v
}

func mdCell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
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
