package agent

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestSplitPrelude(t *testing.T) {
	guard := func(stmt string) string { return "try:\n    " + stmt + "\nexcept Exception:\n    pass\n" }
	cases := []struct {
		name, prelude string
		items         []preludeItem
		rest          string
	}{
		{"default", "import numpy as np\nimport pandas as pd\nimport matplotlib\nimport matplotlib.pyplot as plt\n%matplotlib inline\n",
			[]preludeItem{{Module: "numpy", Bind: "np"}, {Module: "pandas", Bind: "pd"}, {Module: "matplotlib", Bind: "matplotlib", Plain: true},
				{Module: "matplotlib.pyplot", Bind: "plt"}, {Magic: true, Args: "inline"}}, ""},
		{"guarded (a template's)", guard("import numpy as np") + guard("%matplotlib inline") + guard("x = 1"),
			[]preludeItem{{Module: "numpy", Bind: "np", Guarded: true}, {Magic: true, Args: "inline", Guarded: true}},
			guard("x = 1")},
		{"comments, blanks, CRLF", "# setup\r\n\r\n  # indented comment\nimport os.path  # a comment\r\n%matplotlib\nX = os.sep\n",
			[]preludeItem{{Module: "os.path", Bind: "os", Plain: true}, {Magic: true}}, "X = os.sep\n"},
		{"stops at the first other line", "import a\nx = '''\nimport b\n'''\nimport c\n",
			[]preludeItem{{Module: "a", Bind: "a", Plain: true}}, "x = '''\nimport b\n'''\nimport c\n"},
		{"lines that continue or hold more", "import a, b\nimport c; d()\nimport e \\\n  as f\n", nil, "import a, b\nimport c; d()\nimport e \\\n  as f\n"},
		{"keywords are Python's to reject", "import if\n", nil, "import if\n"},
		{"keyword alias", "import a as for\n", nil, "import a as for\n"},
		{"from imports run as before", "from a import b\n", nil, "from a import b\n"},
		{"magic with a comment", "%matplotlib inline # x\n", nil, "%matplotlib inline # x\n"},
		{"indented import", "  import a\n", nil, "  import a\n"},
		{"guard with another handler", "try:\n    import a\nexcept ImportError:\n    pass\n", nil, "try:\n    import a\nexcept ImportError:\n    pass\n"},
		{"empty", "", nil, ""},
	}
	for _, c := range cases {
		items, rest := splitPrelude(c.prelude)
		if !reflect.DeepEqual(items, c.items) || rest != c.rest {
			t.Errorf("%s: splitPrelude(%q) =\n  %+v, %q\nwant\n  %+v, %q", c.name, c.prelude, items, rest, c.items, c.rest)
		}
	}
}

func TestLazyPreludeCellQuotesThePrelude(t *testing.T) {
	// Names cannot carry quotes, but the cell must stay one valid call for
	// any text the items hold.
	items := []preludeItem{{Magic: true, Args: "a'\"\\\u2028😀"}}
	cell := lazyPreludeCell(items)
	i := strings.LastIndex(cell, "_cubicle_lazy_prelude(")
	arg := strings.TrimSuffix(strings.TrimPrefix(cell[i:], "_cubicle_lazy_prelude("), ")\ndel _cubicle_lazy_prelude\n")
	var spec string
	if err := json.Unmarshal([]byte(arg), &spec); err != nil {
		t.Fatalf("argument %s: %v", arg, err)
	}
	var back []preludeItem
	if err := json.Unmarshal([]byte(spec), &back); err != nil || !reflect.DeepEqual(back, items) {
		t.Fatalf("round trip: %+v (%v)", back, err)
	}
	if strings.ContainsAny(arg, "\n\r") {
		t.Errorf("the argument spans lines: %q", arg)
	}
}
