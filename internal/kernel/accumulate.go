package kernel

import "math"

// Accumulator rebuilds a cell's outputs from the outputs streamed for it
// (Request.OnOutput, possibly relayed from a computer's agent): adjacent
// stream text of one stream merged, clear_output and update_display_data
// applied, at most MaxOutputs outputs, as in Result.Outputs. It bounds what
// a hostile stream can make it hold: past MaxOutputs outputs or twice the
// cell's byte limit, one marker of its own says what it dropped.
type Accumulator struct {
	c      *collector
	marker *item // the streamed truncation marker, kept once, last seen
}

// DefaultMaxOutputBytes is the cell's byte limit an Accumulator assumes
// when it is given none: the agent's default and the deployment's
// (computers.max_output_bytes, internal/config), defined here once.
const DefaultMaxOutputBytes = 1 << 20

// NewAccumulator returns an empty Accumulator for a cell whose output limit
// is limit bytes (<= 0: DefaultMaxOutputBytes).
func NewAccumulator(limit int64) *Accumulator {
	if limit <= 0 {
		limit = DefaultMaxOutputBytes
	}
	c := newCollector(2*limit+errorReserve, math.MaxInt64)
	c.noEvents = true
	return &Accumulator{c: c}
}

// Add applies one streamed output.
func (a *Accumulator) Add(o Output) {
	c := a.c
	switch o.Type {
	case OutStream:
		name := o.Name
		if name != "stderr" {
			name = "stdout"
		}
		c.addStream(name, o.Text)
	case OutUpdate:
		c.update(o)
	case OutError:
		c.addError(o)
	case OutClear:
		c.clear()
	case OutInput:
		c.addInput(o.Text)
	case OutTruncated:
		if a.marker != nil {
			a.marker.out = o
			return
		}
		a.marker = &item{out: o}
		c.items = append(c.items, a.marker)
	default:
		c.flushClear()
		c.admit(o)
	}
}

// Outputs returns the cell's outputs so far.
func (a *Accumulator) Outputs() []Output { return a.c.outputs() }
