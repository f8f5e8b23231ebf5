package kernel

import (
	"crypto/sha256"
	"fmt"
	"strings"
)

// collector turns one cell's iopub messages into outputs: merges stream
// chunks, de-duplicates images, applies clear_output and the output cap.
type collector struct {
	limit    int64
	maxImage int64

	items []*item
	used  int64 // bytes admitted (never refunded, even when cleared)

	marker       *item // truncation marker, once the cap is reached
	droppedN     int
	droppedBytes int64
	errAfterCap  bool
	countCapped  bool // the cap reached was MaxOutputs, not the byte limit

	seen    map[[sha256.Size]byte]bool
	dedup   int
	cleared int
	clearOn bool // clear_output(wait=True) pending

	// events are for the streaming callback, drained by Run. Waiting
	// events are coalesced: adjacent stream chunks of one stream merge
	// (evText holds the last one's text), a clear drops what it clears and
	// an update what it supersedes.
	events   []Output
	evText   *strings.Builder
	noEvents bool // nobody drains events any more (cancelled Run)
}

type item struct {
	out Output
	sb  *strings.Builder // stream text being merged
}

func newCollector(limit, maxImage int64) *collector {
	return &collector{limit: limit, maxImage: maxImage, seen: map[[sha256.Size]byte]bool{}}
}

// handle applies one iopub message. It returns errMalformed for content it
// cannot decode (the message is then ignored).
func (c *collector) handle(m *Message) error {
	switch m.Header.MsgType {
	case "stream":
		var s streamContent
		if err := decodeContent(m, &s); err != nil {
			return err
		}
		if s.Name != "stderr" {
			s.Name = "stdout"
		}
		c.addStream(s.Name, s.Text)
	case "display_data", "execute_result", "update_display_data":
		var d displayContent
		if err := decodeContent(m, &d); err != nil {
			return err
		}
		o := displayOutput(d.Data, c.maxImage, c.limit)
		o.Type = OutputType(m.Header.MsgType)
		o.DisplayID = clip(d.Transient.DisplayID, 256)
		if o.Type == OutResult {
			if d.ExecutionCount != nil {
				o.ExecutionCount = *d.ExecutionCount
			}
		}
		if o.Type == OutUpdate {
			c.update(o)
		} else {
			c.addDisplay(o)
		}
	case "error":
		var e errorContent
		if err := decodeContent(m, &e); err != nil {
			return err
		}
		o := Output{Type: OutError, EName: stripANSI(e.EName), EValue: stripANSI(e.EValue)}
		for _, t := range e.Traceback {
			o.Traceback = append(o.Traceback, stripANSI(t))
		}
		c.addError(o)
	case "clear_output":
		var cl clearContent
		if err := decodeContent(m, &cl); err != nil {
			return err
		}
		if cl.Wait {
			c.clearOn = true
		} else {
			c.clear()
		}
	}
	return nil
}

func (c *collector) emit(o Output) {
	if c.noEvents {
		return
	}
	c.sealEvent()
	switch {
	case o.Type == OutClear:
		kept := c.events[:0]
		for _, e := range c.events {
			if e.Type == OutTruncated {
				kept = append(kept, e)
			}
		}
		c.events = kept
	case o.Type == OutUpdate && o.DisplayID != "":
		kept := c.events[:0]
		for _, e := range c.events {
			if e.Type != OutUpdate || e.DisplayID != o.DisplayID {
				kept = append(kept, e)
			}
		}
		c.events = kept
	}
	c.events = append(c.events, o)
}

// emitStream queues stream text, merged into the last waiting event when
// that is text of the same stream.
func (c *collector) emitStream(name, text string) {
	if c.noEvents {
		return
	}
	if n := len(c.events); n > 0 && c.evText != nil && c.events[n-1].Name == name && c.evText.Len()+len(text) <= maxEventText {
		c.evText.WriteString(text)
		return
	}
	c.sealEvent()
	c.events = append(c.events, Output{Type: OutStream, Name: name})
	c.evText = &strings.Builder{}
	c.evText.WriteString(text)
}

func (c *collector) sealEvent() {
	if c.evText != nil {
		c.events[len(c.events)-1].Text = c.evText.String()
		c.evText = nil
	}
}

func (c *collector) drainEvents() []Output {
	c.sealEvent()
	ev := c.events
	c.events = nil
	return ev
}

// stopEvents drops waiting events and queues no more.
func (c *collector) stopEvents() {
	c.events, c.evText, c.noEvents = nil, nil, true
}

// full reports whether a new output would pass MaxOutputs.
func (c *collector) full() bool { return len(c.items) >= MaxOutputs }

// countCap reaches the cap for MaxOutputs, dropping an output of n bytes.
func (c *collector) countCap(n int64) {
	if c.marker == nil {
		c.countCapped = true
	}
	c.capReached(1, n)
}

func (c *collector) flushClear() {
	if c.clearOn {
		c.clearOn = false
		c.clear()
	}
}

func (c *collector) clear() {
	kept := c.items[:0]
	for _, it := range c.items {
		if it == c.marker {
			kept = append(kept, it)
		} else {
			c.cleared++
		}
	}
	c.items = kept
	clear(c.seen)
	c.emit(Output{Type: OutClear})
}

// room reports how many more bytes may be admitted.
func (c *collector) room() int64 { return max(0, c.limit-c.used) }

func (c *collector) capReached(droppedN int, droppedBytes int64) {
	c.droppedN += droppedN
	c.droppedBytes += droppedBytes
	if c.marker == nil {
		c.marker = &item{out: Output{Type: OutTruncated}}
		c.items = append(c.items, c.marker)
		c.marker.out.Text = c.markerText()
		c.emit(c.marker.out)
	}
}

func (c *collector) markerText() string {
	if c.countCapped {
		return fmt.Sprintf("[output truncated: the cell's output reached the limit of %d outputs; %d more bytes in %d outputs were dropped]",
			MaxOutputs, c.droppedBytes, c.droppedN)
	}
	return fmt.Sprintf("[output truncated: the cell's output reached the %s limit; %d more bytes in %d outputs were dropped]",
		humanBytes(c.limit), c.droppedBytes, c.droppedN)
}

func (c *collector) addStream(name, text string) {
	if text == "" {
		return
	}
	c.flushClear()
	if c.marker != nil {
		c.droppedN++
		c.droppedBytes += int64(len(text))
		return
	}
	n := len(c.items)
	merge := n > 0 && c.items[n-1].sb != nil && c.items[n-1].out.Name == name
	if !merge && c.full() {
		c.countCap(int64(len(text)))
		return
	}
	cut := false
	if int64(len(text)) > c.room() {
		keep := cutText(text, int(c.room()))
		c.droppedBytes += int64(len(text) - len(keep))
		text, cut = keep, true
	}
	if text != "" {
		c.used += int64(len(text))
		if merge {
			c.items[n-1].sb.WriteString(text)
		} else {
			sb := &strings.Builder{}
			sb.WriteString(text)
			c.items = append(c.items, &item{out: Output{Type: OutStream, Name: name}, sb: sb})
		}
		c.emitStream(name, text)
	}
	if cut {
		c.capReached(1, 0)
	}
}

func (c *collector) addDisplay(o Output) {
	c.flushClear()
	if o.PNG != nil {
		h := sha256.Sum256(o.PNG)
		if c.seen[h] {
			c.dedup++ // the same figure again (matplotlib shows a figure that is also the last expression twice)
			return
		}
		c.seen[h] = true
	}
	c.admit(o)
}

func (c *collector) admit(o Output) {
	if c.marker != nil {
		c.droppedN++
		c.droppedBytes += o.size()
		return
	}
	if c.full() {
		c.countCap(o.size())
		return
	}
	if sz := o.size(); sz > c.room() {
		// Keep what text fits; structured parts do not survive a cut.
		full := sz
		o.JSON, o.PNG, o.Width, o.Height = nil, nil, 0, 0
		o.Text = cutText(o.Text, int(c.room()))
		if o.Text != "" {
			c.used += o.size()
			c.items = append(c.items, &item{out: o})
			c.emit(o)
			c.capReached(1, full-o.size())
		} else {
			c.capReached(1, full)
		}
		return
	}
	c.used += o.size()
	c.items = append(c.items, &item{out: o})
	c.emit(o)
}

func (c *collector) update(o Output) {
	if o.DisplayID != "" {
		for _, it := range c.items {
			if it.out.DisplayID == o.DisplayID && it.sb == nil && it != c.marker {
				if c.marker != nil || o.size() > c.room() {
					c.droppedN++
					c.droppedBytes += o.size()
					return
				}
				c.used += o.size()
				typ := it.out.Type
				it.out = o
				it.out.Type = typ
				c.emit(o)
				return
			}
		}
	}
	o.Type = OutDisplay // the display it updates is not in this cell: show it as new
	c.addDisplay(o)
}

func (c *collector) addError(o Output) {
	c.flushClear()
	if c.marker == nil && o.size() <= c.room() && !c.full() {
		c.admit(o)
		return
	}
	if c.marker == nil && c.full() {
		c.countCapped = true
	}
	if c.errAfterCap {
		c.droppedN++
		c.droppedBytes += o.size()
		return
	}
	// The first error past the cap is kept (trimmed): why the cell failed
	// matters more than the output that filled the cap.
	c.errAfterCap = true
	full := o.size()
	o.EName = cutText(o.EName, 256)
	o.EValue = cutText(o.EValue, 4096)
	budget := errorReserve - len(o.EName) - len(o.EValue)
	var tb []string
	for i := len(o.Traceback) - 1; i >= 0 && budget > 0; i-- {
		t := cutText(o.Traceback[i], budget)
		budget -= len(t)
		tb = append(tb, t)
	}
	for i, j := 0, len(tb)-1; i < j; i, j = i+1, j-1 {
		tb[i], tb[j] = tb[j], tb[i]
	}
	o.Traceback = tb
	c.capReached(0, full-o.size())
	c.items = append(c.items, &item{out: o})
	c.emit(o)
}

func (c *collector) addInput(prompt string) {
	c.flushClear()
	o := Output{Type: OutInput, Text: cutText(prompt, 1024)}
	if c.marker != nil || c.full() {
		c.countCap(o.size())
		return
	}
	c.items = append(c.items, &item{out: o})
	c.emit(o)
}

// outputs returns the cell's outputs so far.
func (c *collector) outputs() []Output {
	outs := make([]Output, 0, len(c.items)+1)
	if c.cleared > 0 {
		outs = append(outs, Output{Type: OutClear, Text: fmt.Sprintf("[%d earlier outputs of this cell were cleared by clear_output()]", c.cleared)})
	}
	for _, it := range c.items {
		o := it.out
		if it.sb != nil {
			o.Text = it.sb.String()
		}
		if it == c.marker {
			o.Text = c.markerText()
		}
		outs = append(outs, o)
	}
	return outs
}
