package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	respgw "github.com/cubicle-sandbox/cubicle/internal/responses"
)

// The real OpenAI Go client (github.com/openai/openai-go/v3) against the
// gateway: real handlers, real computers, a scripted upstream.

// sdk is a client of the test server with key.
func (e *env) sdk(key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(e.url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// plotCode prints and plots; plotAndPrint runs it once, then answers.
const plotCode = "import matplotlib.pyplot as plt\nprint(6*7)\nplt.plot([1, 2, 3], [4, 1, 9])\nplt.show()"

func plotAndPrint(t *testing.T) *scripted {
	return newScripted(t, func(n int, req map[string]any) (int, any) {
		if lastToolMessage(req) == "" || !strings.Contains(roles(req), ">code_interpreter|tool") {
			return 200, toolCallAnswer("code_interpreter", fmt.Sprintf(`{"code":%q}`, plotCode))
		}
		if tm := toolMessages(req); strings.HasPrefix(tm[len(tm)-1], "42") {
			return 200, chatAnswer(map[string]any{"role": "assistant", "content": "The answer is 42"})
		}
		return 200, chatAnswer(map[string]any{"role": "assistant", "content": "no 42"})
	})
}

// newPlotAndPrintClient starts a server whose upstream is plotAndPrint and
// gives an SDK client of it with a key that may use computers.
func newPlotAndPrintClient(t *testing.T) (*scripted, openai.Client) {
	t.Helper()
	e := newEnv(t, nil, withFiles)
	up := plotAndPrint(t)
	e.withFilesGateway(up)
	_, key := e.newKey("", computerCaps)
	return up, e.sdk(key)
}

var sdkTools = []responses.ToolUnionParam{{OfCodeInterpreter: &responses.ToolCodeInterpreterParam{
	Container: responses.ToolCodeInterpreterContainerUnionParam{
		OfCodeInterpreterToolAuto: &responses.ToolCodeInterpreterContainerCodeInterpreterContainerAutoParam{}}}}}

// TestOpenAIClientNew: Responses.New parses the code_interpreter_call
// item (logs and image outputs) and the answer; previous_response_id
// continues the conversation.
func TestOpenAIClientNew(t *testing.T) {
	up, client := newPlotAndPrintClient(t)
	resp, err := client.Responses.New(t.Context(), responses.ResponseNewParams{
		Model:   "m",
		Input:   responses.ResponseNewParamsInputUnion{OfString: openai.String("What is 6*7? Plot something too.")},
		Tools:   sdkTools,
		Include: []responses.ResponseIncludable{responses.ResponseIncludableCodeInterpreterCallOutputs},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != responses.ResponseStatusCompleted || resp.OutputText() != "The answer is 42" || len(resp.Output) != 2 {
		t.Fatalf("response: %s", resp.RawJSON())
	}
	ci := resp.Output[0].AsCodeInterpreterCall()
	if ci.Type != "code_interpreter_call" || ci.Code != plotCode || !strings.HasPrefix(ci.ContainerID, "cmp_") ||
		ci.Status != responses.ResponseCodeInterpreterToolCallStatusCompleted || len(ci.Outputs) != 2 {
		t.Fatalf("code_interpreter_call: %s", resp.Output[0].RawJSON())
	}
	if logs := ci.Outputs[0].AsLogs(); logs.Type != "logs" || !strings.HasPrefix(logs.Logs, "42") {
		t.Fatalf("logs output: %s", ci.Outputs[0].RawJSON())
	}
	if img := ci.Outputs[1].AsImage(); img.Type != "image" || !strings.HasPrefix(img.URL, "http://127.0.0.1:") || !strings.Contains(img.URL, "/v1/artifacts/art_") {
		t.Fatalf("image output: %s", ci.Outputs[1].RawJSON())
	}
	if resp.Usage.TotalTokens != 30 {
		t.Fatalf("usage: %s", resp.Usage.RawJSON())
	}

	// previous_response_id: the SDK's continuation reaches the upstream
	// with the first exchange replayed.
	next, err := client.Responses.New(t.Context(), responses.ResponseNewParams{
		Model:              "m",
		PreviousResponseID: openai.String(resp.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("Thanks. Again?")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if next.OutputText() != "The answer is 42" || next.PreviousResponseID != "" && next.PreviousResponseID != resp.ID {
		t.Fatalf("continued: %s", next.RawJSON())
	}
	want := "user:What is 6*7? Plot something too.|assistant>code_interpreter|tool|assistant:The answer is 42|user:Thanks. Again?"
	if got := roles(up.requests[len(up.requests)-1]); got != want {
		t.Fatalf("replayed:\n%s\nwant\n%s", got, want)
	}
}

// TestOpenAIClientStreaming: NewStreaming yields the typed events in
// OpenAI's order with contiguous sequence numbers.
func TestOpenAIClientStreaming(t *testing.T) {
	_, client := newPlotAndPrintClient(t)
	stream := client.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{
		Model: "m",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is 6*7?")},
		Tools: sdkTools,
	})
	defer stream.Close()
	var types []string
	var code, text string
	var completed responses.Response
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != int64(len(types)) {
			t.Fatalf("event %d has sequence_number %d: %s", len(types), ev.SequenceNumber, ev.RawJSON())
		}
		types = append(types, ev.Type)
		switch v := ev.AsAny().(type) {
		case responses.ResponseCodeInterpreterCallCodeDeltaEvent:
			code += v.Delta
			if v.OutputIndex != 0 || !strings.HasPrefix(v.ItemID, "ci_") {
				t.Fatalf("code delta: %s", ev.RawJSON())
			}
		case responses.ResponseCodeInterpreterCallCompletedEvent:
			if v.OutputIndex != 0 {
				t.Fatalf("code completed: %s", ev.RawJSON())
			}
		case responses.ResponseTextDeltaEvent:
			text += v.Delta
			if v.OutputIndex != 1 {
				t.Fatalf("text delta: %s", ev.RawJSON())
			}
		case responses.ResponseCompletedEvent:
			completed = v.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.code_interpreter_call.in_progress",
		"response.code_interpreter_call_code.delta", "response.code_interpreter_call_code.done",
		"response.code_interpreter_call.interpreting", "response.code_interpreter_call.completed",
		"response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.completed"}
	// Token-by-token upstreams send several deltas: compare runs, not counts.
	if got := strings.Join(dedupeRuns(types), ","); got != strings.Join(want, ",") {
		t.Fatalf("events:\n%s\nwant\n%s", got, strings.Join(want, ","))
	}
	if code != plotCode || text != "The answer is 42" {
		t.Fatalf("code %q text %q", code, text)
	}
	if completed.Status != responses.ResponseStatusCompleted || completed.OutputText() != "The answer is 42" ||
		completed.Output[0].AsCodeInterpreterCall().Code != plotCode {
		t.Fatalf("completed response: %s", completed.RawJSON())
	}
}

// dedupeRuns collapses repeated neighbours (several deltas in a row).
func dedupeRuns(s []string) []string {
	var out []string
	for _, v := range s {
		if len(out) == 0 || out[len(out)-1] != v || !strings.HasSuffix(v, ".delta") {
			out = append(out, v)
		}
	}
	return out
}

// TestOpenAIClientWebSocket: Responses.Connect, two responses on one
// connection in order, a bad frame answered with an error event on the
// same connection, stream_id echoed.
func TestOpenAIClientWebSocket(t *testing.T) {
	_, client := newPlotAndPrintClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	conn, err := client.Responses.Connect(ctx, responses.ResponseConnectionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// recvResponse reads one response's events up to its terminal event.
	recvResponse := func() (types []string, final responses.ResponsesServerEventUnion) {
		t.Helper()
		code := ""
		for {
			ev, err := conn.Recv(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type == "error" {
				return append(types, ev.Type), ev
			}
			var head struct {
				Seq int `json:"sequence_number"`
			}
			if json.Unmarshal([]byte(ev.RawJSON()), &head) != nil || head.Seq != len(types) {
				t.Fatalf("event %d: %s", len(types), ev.RawJSON())
			}
			types = append(types, ev.Type)
			switch ev.Type {
			case "response.code_interpreter_call_code.delta":
				code += ev.AsResponseCodeInterpreterCallCodeDelta().Delta
			case "response.code_interpreter_call_code.done":
				// The code streams in pieces as the upstream sends it.
				if d := ev.AsResponseCodeInterpreterCallCodeDone(); code != plotCode || d.Code != plotCode {
					t.Fatalf("code deltas %q, done: %s", code, ev.RawJSON())
				}
			case "response.completed", "response.failed", "response.incomplete":
				return types, ev
			}
		}
	}
	create := responses.ResponsesClientEventResponseCreateParam{Model: "m", Tools: sdkTools,
		Input: responses.ResponsesClientEventResponseCreateInputUnionParam{OfString: openai.String("What is 6*7?")}}
	if err := conn.Create(ctx, create); err != nil {
		t.Fatal(err)
	}
	types, final := recvResponse()
	done := final.AsResponseCompleted()
	if final.Type != "response.completed" || done.Response.OutputText() != "The answer is 42" || len(types) < 16 ||
		int(done.SequenceNumber) != len(types)-1 {
		t.Fatalf("first response over WebSocket: %v %s", types, final.RawJSON())
	}
	first := done.Response.ID

	// A bad frame: an error event, and the connection stays usable.
	if err := conn.SendRaw(ctx, []byte(`{"type":"response.create","model":"m","input":"x","temperature":3}`)); err != nil {
		t.Fatal(err)
	}
	_, final = recvResponse()
	if er := final.AsResponsesServerEventResponseWsError(); final.Type != "error" || er.Status != 400 || er.Error.Param != "temperature" {
		t.Fatalf("error event: %s", final.RawJSON())
	}
	if err := conn.SendRaw(ctx, []byte(`{"type":"session.update"}`)); err != nil {
		t.Fatal(err)
	}
	if _, final = recvResponse(); final.AsResponsesServerEventResponseWsError().Error.Param != "type" {
		t.Fatalf("unknown type: %s", final.RawJSON())
	}
	// Background responses are POSTed (responses_background_test.go).
	if err := conn.SendRaw(ctx, []byte(`{"type":"response.create","model":"m","input":"x","background":true}`)); err != nil {
		t.Fatal(err)
	}
	if _, final = recvResponse(); final.AsResponsesServerEventResponseWsError().Error.Param != "background" {
		t.Fatalf("background over WebSocket: %s", final.RawJSON())
	}

	// A second response continuing the first, with a stream_id.
	create.PreviousResponseID = openai.String(first)
	create.StreamID = openai.String("lane-2")
	create.Input = responses.ResponsesClientEventResponseCreateInputUnionParam{OfString: openai.String("Again?")}
	if err := conn.Create(ctx, create); err != nil {
		t.Fatal(err)
	}
	types, final = recvResponse()
	done = final.AsResponseCompleted()
	if final.Type != "response.completed" || done.StreamID != "lane-2" || done.Response.ID == first ||
		done.Response.OutputText() != "The answer is 42" || int(done.SequenceNumber) != len(types)-1 {
		t.Fatalf("second response over WebSocket: %v %s", types, final.RawJSON())
	}
}

// TestOpenAIClientSendBack: without storage, the client sends the
// conversation back, the SDK turning the output items into input items
// (ToParam): the code_interpreter_call reaches the upstream as the model's
// call and the logs it saw.
func TestOpenAIClientSendBack(t *testing.T) {
	up, client := newPlotAndPrintClient(t)
	ask := responses.ResponseInputItemParamOfMessage("What is 6*7?", responses.EasyInputMessageRoleUser)
	resp, err := client.Responses.New(t.Context(), responses.ResponseNewParams{
		Model:   "m",
		Input:   responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{ask}},
		Tools:   sdkTools,
		Store:   openai.Bool(false),
		Include: []responses.ResponseIncludable{responses.ResponseIncludableCodeInterpreterCallOutputs},
	})
	if err != nil {
		t.Fatal(err)
	}
	ci, msg := resp.Output[0].AsCodeInterpreterCall().ToParam(), resp.Output[1].AsMessage().ToParam()
	input := responses.ResponseInputParam{ask, {OfCodeInterpreterCall: &ci}, {OfOutputMessage: &msg},
		responses.ResponseInputItemParamOfMessage("Thanks. And again?", responses.EasyInputMessageRoleUser)}
	next, err := client.Responses.New(t.Context(), responses.ResponseNewParams{
		Model: "m",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
		Tools: sdkTools,
		Store: openai.Bool(false),
	})
	if err != nil {
		t.Fatal(err)
	}
	if next.OutputText() != "The answer is 42" || len(next.Output) != 1 {
		t.Fatalf("sent back: %s", next.RawJSON())
	}
	req := up.requests[len(up.requests)-1]
	if got := roles(req); got != "user:What is 6*7?|assistant>code_interpreter|tool|assistant:The answer is 42|user:Thanks. And again?" {
		t.Fatalf("replayed: %s", got)
	}
	if tm := toolMessages(req); !strings.HasPrefix(tm[0], "42\n"+respgw.ImageSentNote) {
		t.Fatalf("replayed output: %q", tm)
	}
}
