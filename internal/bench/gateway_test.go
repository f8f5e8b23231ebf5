package bench

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestGatewayUpstream: the scripted upstream asks for code first, answers
// once it sees a tool output, streams when asked, and counts its calls.
func TestGatewayUpstream(t *testing.T) {
	up, err := StartGatewayUpstream()
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	post := func(body string) (string, string) {
		resp, err := http.Post(up.URL+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.Header.Get("Content-Type"), string(b)
	}
	ct, body := post(`{"messages":[{"role":"user","content":"1+1?"}]}`)
	var a struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &a); err != nil || ct != "application/json" || len(a.Choices) != 1 ||
		len(a.Choices[0].Message.ToolCalls) != 1 || a.Choices[0].Message.ToolCalls[0].Function.Name != "code_interpreter" ||
		!strings.Contains(a.Choices[0].Message.ToolCalls[0].Function.Arguments, "print(1 + 1)") {
		t.Fatalf("first answer %s %s", ct, body)
	}
	ct, body = post(`{"stream":true,"messages":[{"role":"user"},{"role":"assistant"},{"role":"tool","content":"2"}]}`)
	words := strings.Count(body, `"content":`)
	if ct != "text/event-stream" || words != len(strings.Fields(gatewayBenchAnswer)) || !strings.HasSuffix(body, "data: [DONE]\n\n") ||
		!strings.Contains(body, `"usage":{`) {
		t.Fatalf("streamed answer %s (%d words) %s", ct, words, body)
	}
	ct, body = post(`{"stream":true,"messages":[{"role":"user"}]}`)
	if !strings.Contains(body, `"name":"code_interpreter"`) || strings.Count(body, `"arguments":`) != 2 {
		t.Fatalf("streamed call %s", body)
	}
	if busy, n := up.take(); n != 3 || busy <= 0 {
		t.Fatalf("take: %v over %d calls", busy, n)
	}
	if _, n := up.take(); n != 0 {
		t.Fatalf("take did not reset: %d", n)
	}
}

func TestParseServerTiming(t *testing.T) {
	m, err := parseServerTiming("upstream;dur=1.250, tools;dur=20.000, create;dur=3, gateway;dur=0.5, total;dur=24.75")
	if err != nil || m["upstream"] != 1250*time.Microsecond || m["tools"] != 20*time.Millisecond || m["total"] != 24750*time.Microsecond {
		t.Fatalf("%v %v", m, err)
	}
	if _, err := parseServerTiming("upstream;dur=1"); err == nil {
		t.Fatal("no total: no error")
	}
	if _, err := parseServerTiming("total;dur=x"); err == nil {
		t.Fatal("bad number: no error")
	}
}

func TestWriteGatewayTable(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i)*time.Millisecond/10)
	}
	row := gatewayRow(RowGwOverhead, "gateway overhead per tool round", s, 0)
	if row.P50 != Duration(5*time.Millisecond) || row.P95 != Duration(9500*time.Microsecond) || row.N != 100 {
		t.Fatalf("row %+v", row)
	}
	rep := &GatewayReport{N: 100, Batches: 1, Concurrency: 20, Throughput: 12.5, Rows: []GatewayRow{row},
		Targets: []Target{{Row: RowGwOverhead, What: "gateway overhead per tool round", Limit: Duration(5 * time.Millisecond),
			P50: row.P50, Met: true}}}
	var b bytes.Buffer
	if err := WriteGatewayTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"gateway overhead per tool round                       5.00      9.50",
		"1 batches of 20 at once", "12.5 responses/s", "≤ 5 ms p50: met (5.00 ms)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("table lacks %q:\n%s", want, out)
		}
	}
}
