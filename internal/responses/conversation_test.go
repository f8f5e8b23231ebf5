package responses

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/responses/upstreamtest"
	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// pngURL is a data URL of a (fake) PNG image with content.
func pngURL(content string) string {
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte(content))
}

// TestPreviousResponse: a continuation replays the stored conversation
// (input, tool rounds, answer; not the instructions) before its own
// input, and copies the chain's files and the artifacts its computers
// kept into its own computer, with a note to the model.
func TestPreviousResponse(t *testing.T) {
	forEachUpstream(t, func(t *testing.T, api string, edit func(*Config)) {
		h := newHarness(t, api, func(n int, req map[string]any) (int, any) {
			switch n {
			case 1, 3:
				return 200, upstreamtest.ToolCallsAnswer("", upstreamtest.Call{ID: "c" + string(rune('0'+n)), Name: tools.CodeInterpreterName, Args: `{"code":"plot()"}`})
			case 2:
				return 200, upstreamtest.TextAnswer("here is the plot")
			}
			return 200, upstreamtest.TextAnswer("replotted")
		}, edit)
		h.comp.run = func(context.Context, string, json.RawMessage) (tools.Result, error) {
			return tools.Result{Output: "[image]", Outputs: []tools.CodeOutput{{Type: "image", URL: pngURL("png")}}}, nil
		}
		h.files.files["file_1"], h.files.names["file_1"] = []byte("a,b"), "data.csv"
		first, err := h.create(`{"input":[{"role":"user","content":[{"type":"input_text","text":"plot it"},{"type":"input_file","file_id":"file_1"}]}],
			"instructions":"be brief","include":["code_interpreter_call.outputs"],"tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`)
		if err != nil {
			t.Fatal(err)
		}
		// The image output became an artifact with an absolute URL.
		outs := *first.Output[0].(CodeInterpreterCall).Outputs
		if outs[0].URL != "https://cubicle.example/v1/artifacts/art_1/content" {
			t.Fatalf("image url %q", outs[0].URL)
		}
		second, err := h.create(`{"input":"again","previous_response_id":"` + first.ID + `","include":["code_interpreter_call.outputs"],"tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`)
		if err != nil {
			t.Fatal(err)
		}
		if second.PreviousResponseID == nil || *second.PreviousResponseID != first.ID || second.Status != "completed" {
			t.Fatalf("second %+v", second)
		}
		got := messages(h.up.Request(2))
		// The first round's note about the copied file stays in the replay.
		want := []string{"user:plot it", "assistant:<nil> code_interpreter", "tool:[image]",
			"system:" + InputsNotePrefix + "/workspace/data.csv", "assistant:here is the plot", "user:again"}
		if !slices.Equal(got, want) {
			t.Fatalf("continuation's first round\n%q\nwant\n%q", got, want)
		}
		if len(h.files.copies) != 2 || !slices.Equal(h.files.copies[1].FileIDs, []string{"file_1"}) ||
			!slices.Equal(h.files.copies[1].ArtifactIDs, []string{"art_1"}) {
			t.Fatalf("copies %+v", h.files.copies)
		}
		if note := messages(h.up.Request(3)); !strings.Contains(note[len(note)-1], ArtifactsNotePrefix+"/workspace/artifacts/art_1.png") {
			t.Fatalf("second computer's note: %q", note)
		}
		// The continuation's own conversation carries the whole chain.
		sr, _ := h.store.Get(context.Background(), "org_1", second.ID)
		var c conversation
		json.Unmarshal(sr.Conversation, &c)
		if len(c.Messages) != 10 || !slices.Equal(c.FileIDs, []string{"file_1"}) || !slices.Equal(c.ArtifactIDs, []string{"art_2", "art_1"}) {
			t.Fatalf("kept %d messages, files %q, artifacts %q", len(c.Messages), c.FileIDs, c.ArtifactIDs)
		}
	})
}

// TestNotStored: store false keeps nothing, so the response can be
// neither continued nor referenced; a failing image save keeps the data URL.
func TestNotStored(t *testing.T) {
	h := newHarness(t, APIChat, func(n int, req map[string]any) (int, any) {
		if n == 1 {
			return 200, upstreamtest.ToolCallsAnswer("", upstreamtest.Call{ID: "c1", Name: tools.CodeInterpreterName, Args: `{"code":"1"}`})
		}
		return 200, upstreamtest.TextAnswer("ok")
	}, nil)
	url := pngURL("fail")
	h.comp.run = func(context.Context, string, json.RawMessage) (tools.Result, error) {
		return tools.Result{Output: "x", Outputs: []tools.CodeOutput{{Type: "image", URL: url}}}, nil
	}
	resp, err := h.create(`{"input":"hi","store":false,"include":["code_interpreter_call.outputs"],"tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Store || len(h.store.byID) != 0 {
		t.Fatalf("store %v, %d stored", resp.Store, len(h.store.byID))
	}
	if got := (*resp.Output[0].(CodeInterpreterCall).Outputs)[0].URL; got != url {
		t.Fatalf("url %q, want the data URL", got)
	}
	msgID := resp.Output[1].(Message).ID
	for _, body := range []string{`{"input":"more","previous_response_id":"` + resp.ID + `"}`,
		`{"input":[{"type":"item_reference","id":"` + msgID + `"}]}`} {
		if _, err := h.g.Begin(context.Background(), h.p, h.request(body)); err == nil {
			t.Fatalf("%s: no error", body)
		}
	}
}

// TestItemReference: an item_reference input item is the stored output
// item it names, replayed as if sent back whole.
func TestItemReference(t *testing.T) {
	h := newHarness(t, APIResponses, func(n int, req map[string]any) (int, any) {
		if n == 1 {
			return 200, upstreamtest.ToolCallsAnswer("", upstreamtest.Call{ID: "c1", Name: "builtin__computer_exec", Args: `{"command":"ls"}`})
		}
		return 200, upstreamtest.TextAnswer("answer " + string(rune('0'+n)))
	}, nil)
	first, err := h.create(`{"input":"hi","tools":[{"type":"tool","name":"builtin__computer_exec"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	tcID, msgID := first.Output[0].(ToolCall).ID, first.Output[1].(Message).ID
	_, err = h.create(`{"input":[{"role":"user","content":"hi"},{"type":"item_reference","id":"` + tcID + `"},
		{"type":"item_reference","id":"` + msgID + `"},{"role":"user","content":"and?"}],"tools":[{"type":"tool","name":"builtin__computer_exec"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	got := messages(h.up.Request(2))
	want := []string{"user:hi", "assistant:<nil> builtin__computer_exec", "tool:ran builtin__computer_exec", "assistant:answer 2", "user:and?"}
	if !slices.Equal(got, want) {
		t.Fatalf("messages\n%q\nwant\n%q", got, want)
	}
}

// TestInputImageAndUpload: an input_image by file_id reaches the upstream
// as a data URL; an input_file sent as file_data is stored as a file and
// copied into the computer.
func TestInputImageAndUpload(t *testing.T) {
	h := newHarness(t, APIChat, func(n int, req map[string]any) (int, any) {
		if n == 1 {
			return 200, upstreamtest.ToolCallsAnswer("", upstreamtest.Call{ID: "c1", Name: "builtin__computer_exec", Args: `{"command":"ls"}`})
		}
		return 200, upstreamtest.TextAnswer("seen")
	}, nil)
	png := "\x89PNG\r\n\x1a\n" + strings.Repeat("\x00", 16)
	h.files.files["file_img"] = []byte(png)
	h.files.files["file_txt"] = []byte("not an image")
	body := `{"input":[{"role":"user","content":[{"type":"input_text","text":"look"},{"type":"input_image","file_id":"file_img"},
		{"type":"input_file","filename":"notes.txt","file_data":"` + base64.StdEncoding.EncodeToString([]byte("hello")) + `"}]}],
		"tools":[{"type":"tool","name":"builtin__computer_exec"}]}`
	if _, err := h.create(body); err != nil {
		t.Fatal(err)
	}
	parts := h.up.Request(0)["messages"].([]any)[0].(map[string]any)["content"].([]any)
	img := parts[1].(map[string]any)["image_url"].(map[string]any)["url"].(string)
	if img != "data:image/png;base64,"+base64.StdEncoding.EncodeToString([]byte(png)) {
		t.Fatalf("image part %v", parts[1])
	}
	if len(h.files.copies) != 1 || len(h.files.copies[0].FileIDs) != 1 || string(h.files.files[h.files.copies[0].FileIDs[0]]) != "hello" {
		t.Fatalf("copies %+v", h.files.copies)
	}
	if got := messages(h.up.Request(1)); got[len(got)-1] != "system:"+InputsNotePrefix+"/workspace/notes.txt" {
		t.Fatalf("note %q", got)
	}
	_, err := h.g.Begin(context.Background(), h.p, h.request(`{"input":[{"role":"user","content":[{"type":"input_image","file_id":"file_txt"}]}]}`))
	if err == nil || !strings.Contains(err.Error(), "not a PNG, JPEG, GIF or WebP image") {
		t.Fatalf("a text file as an image: %v", err)
	}
}

// TestTiming: the Server-Timing header adds the run's parts up.
func TestTiming(t *testing.T) {
	h := newHarness(t, APIChat, func(int, map[string]any) (int, any) { return 200, upstreamtest.TextAnswer("hi") }, nil)
	r, err := h.g.Begin(context.Background(), h.p, h.request(`{"input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	if r.Stream() {
		t.Fatal("not a streamed request")
	}
	if _, err := r.Do(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	tm := r.Timing()
	st := tm.ServerTiming()
	if tm.Upstream <= 0 || tm.Total < tm.Upstream || tm.Tools != 0 || !strings.HasPrefix(st, "upstream;dur=") ||
		!strings.Contains(st, ", gateway;dur=") || strings.Count(st, ";dur=") != 5 {
		t.Fatalf("timing %+v, header %q", tm, st)
	}
}

// TestParamsReachUpstream: the model parameters reach each upstream API
// in its own names and are echoed in the response.
func TestParamsReachUpstream(t *testing.T) {
	body := `{"input":"hi","temperature":0.5,"top_p":0.9,"max_output_tokens":100,"user":"u1","service_tier":"flex","prompt_cache_retention":"in_memory",
		"reasoning":{"effort":"low","generate_summary":"auto"},"background":true,
		"text":{"verbosity":"low","format":{"type":"json_schema","name":"out","schema":{"type":"object"},"strict":true,"description":"d"}}}`
	for api, want := range map[string]map[string]any{
		APIChat: {"temperature": 0.5, "top_p": 0.9, "max_tokens": 100.0, "user": "u1", "service_tier": "flex",
			"reasoning_effort": "low", "verbosity": "low", "prompt_cache_retention": "in_memory"},
		APIResponses: {"temperature": 0.5, "max_output_tokens": 100.0, "store": false, "prompt_cache_retention": "in_memory"},
	} {
		h := newHarness(t, api, func(int, map[string]any) (int, any) { return 200, upstreamtest.TextAnswer("{}") }, nil)
		resp, err := h.create(body)
		if err != nil {
			t.Fatal(err)
		}
		raw := h.up.Raw(0)
		for k, v := range want {
			if raw[k] != v {
				t.Errorf("%s: %s = %v, want %v", api, k, raw[k], v)
			}
		}
		switch api {
		case APIChat:
			rf := raw["response_format"].(map[string]any)
			if js := rf["json_schema"].(map[string]any); rf["type"] != "json_schema" || js["name"] != "out" || js["strict"] != true {
				t.Errorf("response_format %v", rf)
			}
		case APIResponses:
			if raw["text"].(map[string]any)["format"].(map[string]any)["name"] != "out" || raw["reasoning"].(map[string]any)["effort"] != "low" {
				t.Errorf("text %v, reasoning %v", raw["text"], raw["reasoning"])
			}
		}
		if resp.Temperature != 0.5 || resp.TopP != 0.9 || *resp.MaxOutputTokens != 100 || resp.ServiceTier != "flex" || !resp.Background ||
			*resp.Reasoning.Summary != "auto" || *resp.Text.Verbosity != "low" || resp.Text.Format.Name != "out" {
			t.Errorf("%s: echoed %+v", api, resp)
		}
	}
}

// TestImagesToResponses: image parts reach a Responses upstream as
// input_image content.
func TestImagesToResponses(t *testing.T) {
	h := newHarness(t, APIResponses, func(int, map[string]any) (int, any) { return 200, upstreamtest.TextAnswer("a cat") }, nil)
	url := pngURL("cat")
	if _, err := h.create(`{"input":[{"role":"user","content":[{"type":"input_text","text":"what?"},
		{"type":"input_image","image_url":"` + url + `","detail":"low"},{"type":"input_image","image_url":"https://example.com/a.png"}]}]}`); err != nil {
		t.Fatal(err)
	}
	content := h.up.Raw(0)["input"].([]any)[0].(map[string]any)["content"].([]any)
	img, web := content[1].(map[string]any), content[2].(map[string]any)
	if content[0].(map[string]any)["type"] != "input_text" || img["type"] != "input_image" || img["image_url"] != url ||
		img["detail"] != "low" || web["detail"] != "auto" {
		t.Fatalf("content %v", content)
	}
}
