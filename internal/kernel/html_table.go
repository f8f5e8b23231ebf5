package kernel

import (
	"strconv"
	"strings"
)

// maxTableCells bounds the grid a table expands to (colspan × rowspan can
// amplify a short input); a larger table is rendered without spans.
const maxTableCells = 1 << 20

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

// startTableTag handles the opening tags of table structure.
func (cv *htmlConv) startTableTag(name, attrs string) {
	if name == "table" {
		if cv.table() == nil {
			cv.block(2)
		}
		if len(cv.tables) < 8 {
			cv.tables = append(cv.tables, &htmlTable{})
		}
		return
	}
	t := cv.table()
	if t == nil {
		return
	}
	switch name {
	case "thead":
		t.inHead = true
	case "tbody", "tfoot":
		t.inHead = false
	case "tr":
		t.endRow()
		t.rows = append(t.rows, nil)
		t.inRow = true
		if t.inHead {
			t.headRows = len(t.rows)
		}
	case "td", "th":
		if !t.inRow {
			t.rows = append(t.rows, nil)
			t.inRow = true
		}
		c := &htmlCell{header: name == "th", colspan: spanAttr(attrs, "colspan"), rowspan: spanAttr(attrs, "rowspan")}
		t.cell = c
		t.rows[len(t.rows)-1] = append(t.rows[len(t.rows)-1], c)
	}
}

// endTableTag handles the closing tags of table structure. A finished
// table nested in a cell becomes that cell's text.
func (cv *htmlConv) endTableTag(name string) {
	t := cv.table()
	if t == nil {
		return
	}
	switch name {
	case "td", "th":
		t.cell = nil
	case "tr":
		t.endRow()
	case "thead":
		t.inHead = false
	case "table":
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
		headRows = leadingHeaderRows(rows)
	}
	grid := expandSpans(rows, headRows)
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
	return pipeTable(joinHeader(grid[:headRows], width), grid[headRows:], width)
}

// leadingHeaderRows counts the leading rows made only of <th> cells.
func leadingHeaderRows(rows [][]*htmlCell) int {
	n := 0
	for _, r := range rows {
		for _, c := range r {
			if !c.header {
				return n
			}
		}
		n++
	}
	return n
}

// expandSpans lays the cells out on a grid of text, honouring colspan and
// rowspan unless the table would expand past maxTableCells. A header cell
// spanning columns labels every column it covers.
func expandSpans(rows [][]*htmlCell, headRows int) [][]string {
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
					v = txt
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
	return grid
}

// joinHeader merges header rows into one, per column, distinct labels
// joined with " / ".
func joinHeader(rows [][]string, width int) []string {
	head := make([]string, width)
	for _, r := range rows {
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
	return head
}

// pipeTable writes a markdown pipe table of width columns.
func pipeTable(head []string, body [][]string, width int) string {
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
	for _, r := range body {
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
