package responses

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	oai "github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/cubicle-sandbox/cubicle/internal/errdefs"
)

func TestValidate(t *testing.T) {
	ok := func(body string, computers bool) *plan {
		t.Helper()
		var r Request
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatal(err)
		}
		p, err := r.validate("default-model", computers)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return p
	}
	p := ok(`{"input":"hi","instructions":"be brief"}`, false)
	if p.model != "default-model" || len(p.messages) != 2 || p.messages[0].Role != "system" || *p.messages[1].Content != "hi" {
		t.Fatalf("plan: %+v", p)
	}
	p = ok(`{"model":"m","input":[{"role":"developer","content":"sys"},{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}],
		"tools":[{"type":"code_interpreter","container":{"type":"auto"}},{"type":"function","name":"f","parameters":{"type":"object"}}],
		"tool_choice":{"type":"function","name":"f"},"max_tool_calls":2,"include":["code_interpreter_call.outputs"]}`, true)
	if !p.codeInterpreter || !p.clientFuncs["f"] || len(p.tools) != 2 || p.maxToolCalls != 2 || !p.includeOutputs ||
		*p.messages[0].Content != "sys" || p.messages[0].Role != "system" || *p.messages[1].Content != "ab" {
		t.Fatalf("plan: %+v", p)
	}
	if string(p.toolChoice) != `{"function":{"name":"f"},"type":"function"}` {
		t.Fatalf("tool_choice: %s", p.toolChoice)
	}
	p = ok(`{"model":"m","parallel_tool_calls":false,"input":[{"role":"user","content":[{"type":"input_text","text":"a"},
		{"type":"input_file","file_id":"file_1"},{"type":"input_file","file_id":"file_2"}]},
		{"role":"user","content":[{"type":"input_file","file_id":"file_1"}]}],
		"tools":[{"type":"tool","name":"builtin__computer_exec"},{"type":"tool","name":"builtin__computer_*"},{"type":"tool","name":"python"}],
		"tool_choice":{"type":"function","name":"python"}}`, true)
	var names []string
	for _, tl := range p.tools {
		if tl.Function.Strict == nil || !*tl.Function.Strict {
			t.Fatalf("not strict: %+v", tl)
		}
		names = append(names, tl.Function.Name)
	}
	if got := fmt.Sprint(names); got != "[builtin__computer_exec builtin__computer_write_file builtin__computer_read_file python]" {
		t.Fatalf("tools: %s", got)
	}
	if fmt.Sprint(p.fileIDs) != "[file_1 file_2]" || *p.messages[0].Content != "a" || len(p.messages) != 1 ||
		p.parallel == nil || *p.parallel {
		t.Fatalf("plan: %+v", p)
	}
	bad := []struct{ body, code, param string }{
		{`{"input":"hi","tools":[{"type":"tool","name":"python"}]}`, "computer_not_configured", "tools"},
		{`{"input":"hi","tools":[{"type":"tool","name":"code_interpreter"}]}`, "invalid_request", "tools[0].name"},
		{`{"input":[{"role":"user","content":[{"type":"input_text","text":"a","file_id":"file_1"}]}]}`, "invalid_request", "input[0].content[0].file_id"},
		{`{"input":"hi","tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`, "computer_not_configured", "tools"},
		{`{"input":"hi","stream":true,"tools":[{"type":"function","name":"f","strict":"yes"}]}`, "invalid_request", "tools[0].strict"},
		{`{"input":"hi","max_tool_calls":0}`, "invalid_request", "max_tool_calls"},
		{`{"model":"m"}`, "invalid_request", "input"},
		{`{"input":[{"role":"user","content":"x","extra":1}]}`, "invalid_request", "input[0].extra"},
		{`{"input":"hi","tool_choice":{"type":"function","name":"nope"}}`, "invalid_request", "tool_choice"},
		{`{"input":"hi","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"g"}]}}`, "invalid_request", "tool_choice.tools[0]"},
		{`{"input":"hi","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"allowed_tools","mode":"none","tools":[{"type":"function","name":"f"}]}}`, "invalid_request", "tool_choice.mode"},
		{`{"input":"hi","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[]}}`, "invalid_request", "tool_choice.tools"},
		{`{"input":"hi","include":["file_search_call.outputs"]}`, "invalid_request", "include[0]"},
		{`{"input":[{"role":"user","content":[{"type":"input_file","file_id":"f","detail":"original"}]}]}`, "invalid_request", "input[0].content[0].detail"},
		{`{"input":[{"role":"user","content":[{"type":"input_text","text":"a","prompt_cache_breakpoint":"now"}]}]}`, "invalid_request", "input[0].content[0].prompt_cache_breakpoint"},
	}
	for _, c := range bad {
		var r Request
		json.Unmarshal([]byte(c.body), &r)
		_, err := r.validate("d", false)
		var ge *Error
		if !errors.As(err, &ge) || ge.Code != c.code || ge.Param != c.param || ge.Kind != errdefs.InvalidArgument {
			t.Fatalf("%s: got %v (%+v), want %s param %s", c.body, err, ge, c.code, c.param)
		}
	}
	var r Request
	json.Unmarshal([]byte(`{"input":"hi"}`), &r)
	if _, err := r.validate("", true); err == nil {
		t.Fatal("no model and no default: accepted")
	}

	// allowed_tools offers only the listed tools, with its mode as the
	// tool_choice; include values other than the outputs have no effect.
	p = ok(`{"input":"hi","tools":[{"type":"code_interpreter","container":{"type":"auto"}},{"type":"function","name":"f"},{"type":"function","name":"g"}],
		"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"g"},{"type":"code_interpreter"}]},
		"include":["reasoning.encrypted_content","message.output_text.logprobs"]}`, true)
	names = nil
	for _, tl := range p.tools {
		names = append(names, tl.Function.Name)
	}
	if fmt.Sprint(names) != "[code_interpreter g]" || string(p.toolChoice) != `"required"` || p.includeOutputs {
		t.Fatalf("allowed_tools: tools %v, tool_choice %s, includeOutputs %v", names, p.toolChoice, p.includeOutputs)
	}
}

// strs is SDK enum values as strings.
func strs[T ~string](vs ...T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// TestSDKEnums: every value openai-go (the version pinned in go.mod)
// declares for an enumerated create parameter is accepted, as is the API
// reference's "in-memory".
func TestSDKEnums(t *testing.T) {
	fields := []struct {
		format string
		values []string
	}{
		{`{"service_tier":%q}`, strs(oai.ResponseNewParamsServiceTierAuto, oai.ResponseNewParamsServiceTierDefault,
			oai.ResponseNewParamsServiceTierFlex, oai.ResponseNewParamsServiceTierScale, oai.ResponseNewParamsServiceTierPriority,
			oai.ResponseNewParamsServiceTierFast, oai.ResponseNewParamsServiceTierUltrafast)},
		{`{"prompt_cache_retention":%q}`, append(strs(oai.ResponseNewParamsPromptCacheRetentionInMemory,
			oai.ResponseNewParamsPromptCacheRetention24h), "in-memory")},
		{`{"truncation":%q}`, strs(oai.ResponseNewParamsTruncationAuto, oai.ResponseNewParamsTruncationDisabled)},
		{`{"reasoning":{"effort":%q}}`, strs(shared.ReasoningEffortNone, shared.ReasoningEffortMinimal, shared.ReasoningEffortLow,
			shared.ReasoningEffortMedium, shared.ReasoningEffortHigh, shared.ReasoningEffortXhigh, shared.ReasoningEffortMax)},
		{`{"reasoning":{"summary":%q}}`, strs(shared.ReasoningSummaryAuto, shared.ReasoningSummaryConcise, shared.ReasoningSummaryDetailed)},
		{`{"reasoning":{"generate_summary":%q}}`, strs(shared.ReasoningGenerateSummaryAuto, shared.ReasoningGenerateSummaryConcise,
			shared.ReasoningGenerateSummaryDetailed)},
		{`{"text":{"verbosity":%q}}`, strs(oai.ResponseTextConfigVerbosityLow, oai.ResponseTextConfigVerbosityMedium,
			oai.ResponseTextConfigVerbosityHigh)},
		{`{"include":[%q]}`, strs(oai.ResponseIncludableFileSearchCallResults, oai.ResponseIncludableWebSearchCallResults,
			oai.ResponseIncludableWebSearchCallActionSources, oai.ResponseIncludableMessageInputImageImageURL,
			oai.ResponseIncludableComputerCallOutputOutputImageURL, oai.ResponseIncludableCodeInterpreterCallOutputs,
			oai.ResponseIncludableReasoningEncryptedContent, oai.ResponseIncludableMessageOutputTextLogprobs)},
		{`{"tool_choice":%q}`, strs(oai.ToolChoiceOptionsNone, oai.ToolChoiceOptionsAuto, oai.ToolChoiceOptionsRequired)},
		{`{"tool_choice":{"type":"allowed_tools","mode":%q,"tools":[{"type":"function","name":"f"}]}}`,
			strs(oai.ToolChoiceAllowedModeAuto, oai.ToolChoiceAllowedModeRequired)},
		{`{"input":[{"role":"user","content":[{"type":"input_image","image_url":"https://example.com/a.png","detail":%q}]}]}`,
			strs(oai.ResponseInputImageDetailLow, oai.ResponseInputImageDetailHigh, oai.ResponseInputImageDetailAuto,
				oai.ResponseInputImageDetailOriginal)},
		{`{"input":[{"role":"user","content":[{"type":"input_file","file_id":"file_1","detail":%q,"prompt_cache_breakpoint":{"mode":"explicit"}}]}]}`,
			strs(oai.ResponseInputFileDetailAuto, oai.ResponseInputFileDetailLow, oai.ResponseInputFileDetailHigh)},
	}
	for _, f := range fields {
		for _, v := range f.values {
			var r Request
			base := `{"model":"m","input":"hi","tools":[{"type":"function","name":"f"}]}`
			if err := json.Unmarshal([]byte(base), &r); err != nil {
				t.Fatal(err)
			}
			body := fmt.Sprintf(f.format, v)
			if err := strict([]byte(body), &r, "request"); err != nil {
				t.Fatalf("%s: %v", body, err)
			}
			if _, err := r.validate("m", false); err != nil {
				t.Errorf("%s: %v", body, err)
			}
		}
	}
}

// TestParseInputReplay: items a client sends back (its function calls
// and outputs, the gateway's code_interpreter_call and tool_call items)
// become the Chat Completions turns the model saw.
func TestParseInputReplay(t *testing.T) {
	in, err := parseInput(json.RawMessage(`[
		{"role":"user","content":"plot it"},
		{"type":"code_interpreter_call","id":"ci_1","status":"completed","container_id":"cmp_1","code":"print(1)",
		 "outputs":[{"type":"logs","logs":"1"},{"type":"image","url":"data:image/png;base64,AA=="}]},
		{"type":"code_interpreter_call","id":"ci_2","status":"completed","container_id":"cmp_1","code":"x","outputs":null},
		{"type":"tool_call","id":"tc_1","status":"completed","container_id":"cmp_1","name":"builtin__computer_exec","arguments":"{\"command\":\"ls\"}","output":"a.txt"},
		{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"done","annotations":[],"logprobs":[]}]},
		{"type":"function_call","id":"fc_1","call_id":"c1","name":"f","arguments":"{}","status":"completed"},
		{"type":"function_call","id":"fc_2","call_id":"c2","name":"g","arguments":"{}","status":"completed"},
		{"type":"function_call_output","call_id":"c1","output":"r1"},
		{"type":"function_call_output","call_id":"c2","output":"r2"},
		{"role":"user","content":[{"type":"input_file","file_id":"file_1"}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(in.messages)
	want := `[{"role":"user","content":"plot it"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"ci_1","type":"function","function":{"name":"code_interpreter","arguments":"{\"code\":\"print(1)\"}"}}]},` +
		`{"role":"tool","content":"1\n[image]","tool_call_id":"ci_1"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"ci_2","type":"function","function":{"name":"code_interpreter","arguments":"{\"code\":\"x\"}"}}]},` +
		`{"role":"tool","content":"(the output of this call is not available)","tool_call_id":"ci_2"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"tc_1","type":"function","function":{"name":"builtin__computer_exec","arguments":"{\"command\":\"ls\"}"}}]},` +
		`{"role":"tool","content":"a.txt","tool_call_id":"tc_1"},` +
		`{"role":"assistant","content":"done"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"g","arguments":"{}"}}]},` +
		`{"role":"tool","content":"r1","tool_call_id":"c1"},{"role":"tool","content":"r2","tool_call_id":"c2"}]`
	if string(b) != want {
		t.Fatalf("messages:\n%s\nwant\n%s", b, want)
	}
	if fmt.Sprint(in.fileIDs) != "[file_1]" {
		t.Fatalf("file ids: %v", in.fileIDs)
	}
	// The stored form reads back the same (conversations are kept as JSON).
	var back []chatMessage
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if b2, _ := json.Marshal(back); string(b2) != want {
		t.Fatalf("round trip:\n%s", b2)
	}
}

// TestParseInputImages: input_image parts become image_url parts (file
// ids left to resolve); bad forms are 400s naming the part.
func TestParseInputImages(t *testing.T) {
	in, err := parseInput(json.RawMessage(`[{"role":"user","content":[{"type":"input_text","text":"what is this?"},
		{"type":"input_image","image_url":"https://example.com/a.png","detail":"low"},
		{"type":"input_image","image_url":"data:image/jpeg;base64,/9j/"},
		{"type":"input_image","file_id":"file_img","detail":"high"}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(in.messages)
	want := `[{"role":"user","content":[{"type":"text","text":"what is this?"},` +
		`{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"low"}},` +
		`{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/"}},` +
		`{"type":"image_url","image_url":{"url":"","detail":"high"}}]}]`
	if string(b) != want {
		t.Fatalf("messages:\n%s\nwant\n%s", b, want)
	}
	if len(in.images) != 1 || in.images[0] != (imageRef{msg: 0, part: 3, fileID: "file_img", param: "input[0].content[3].file_id"}) {
		t.Fatalf("image refs: %+v", in.images)
	}
	var back []chatMessage
	if json.Unmarshal(b, &back) != nil || len(back[0].Parts) != 4 || back[0].Parts[1].ImageURL.Detail != "low" {
		t.Fatalf("round trip: %+v", back)
	}
	for body, param := range map[string]string{
		`[{"role":"user","content":[{"type":"input_image","image_url":"http://example.com/a.png"}]}]`:         "input[0].content[0].image_url",
		`[{"role":"user","content":[{"type":"input_image","image_url":"data:image/svg+xml;base64,AA"}]}]`:     "input[0].content[0].image_url",
		`[{"role":"user","content":[{"type":"input_image","image_url":"https://x/a.png","detail":"max"}]}]`:   "input[0].content[0].detail",
		`[{"role":"user","content":[{"type":"input_image"}]}]`:                                                "input[0].content[0].image_url",
		`[{"role":"user","content":[{"type":"input_image","image_url":"https://x/a.png","file_id":"f"}]}]`:    "input[0].content[0]",
		`[{"role":"assistant","content":[{"type":"input_image","image_url":"https://x/a.png"}]}]`:             "input[0].content[0]",
		`[{"role":"user","content":[{"type":"input_file","file_data":"AA=="}]}]`:                              "input[0].content[0].filename",
		`[{"role":"user","content":[{"type":"input_file","file_data":"%%%","filename":"a.txt"}]}]`:            "input[0].content[0].file_data",
		`[{"role":"user","content":[{"type":"input_file","file_data":"data:text/plain,hi","filename":"a"}]}]`: "input[0].content[0].file_data",
		`[{"role":"user","content":[{"type":"input_file","file_url":"https://x/a.pdf"}]}]`:                    "input[0].content[0].file_url",
		`[{"role":"user","content":[{"type":"input_file","file_id":"f","filename":"a.txt"}]}]`:                "input[0].content[0].filename",
		`[{"role":"user","content":[{"type":"input_file","file_id":"f","file_data":"AA=="}]}]`:                "input[0].content[0]",
		`[{"type":"code_interpreter_call","id":"ci_1","outputs":[]}]`:                                         "input[0]",
		`[{"type":"tool_call","id":"tc_1","arguments":"{}"}]`:                                                 "input[0]",
		`[{"type":"code_interpreter_call","id":"ci_1","code":"x","outputs":"logs"}]`:                          "input[0].outputs",
	} {
		_, err := parseInput(json.RawMessage(body))
		var ge *Error
		if !errors.As(err, &ge) || ge.Param != param || ge.Kind != errdefs.InvalidArgument {
			t.Fatalf("%s: got %v (%+v), want param %s", body, err, ge, param)
		}
	}
}
