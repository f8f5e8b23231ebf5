package httpapi_test

import (
	"io"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	respgw "github.com/cubicle-sandbox/cubicle/internal/responses"
)

// TestContainerFileCitations: files the response's code wrote appear as
// container_file_citation annotations on the answer's text (on the span
// that names them, or an empty span at its end), parsed by openai-go;
// their file_id is the container file's, whose content the containers API
// serves. A file the code did not write (there before) is not cited.
func TestContainerFileCitations(t *testing.T) {
	e := newEnv(t, nil)
	e.withGatewayConfig(respgw.Config{UpstreamURL: codeFromInput(t).srv.URL + "/v1", Model: "m"})
	_, key := e.newKey("", computerCaps)
	box := e.create(key, nil)
	e.sh(key, box.ID, "echo old > /workspace/old.txt")
	client := e.sdk(key)
	code := "import os\nos.makedirs('/workspace/out', exist_ok=True)\n" +
		"open('/workspace/out/report.csv', 'w').write('a,b\\n1,2\\n')\nopen('/workspace/notes.txt', 'w').write('n')\n" +
		"print('saved /workspace/out/report.csv')"
	resp, err := client.Responses.New(t.Context(), responses.ResponseNewParams{
		Model: "m",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(code)},
		Tools: []responses.ToolUnionParam{{OfCodeInterpreter: &responses.ToolCodeInterpreterParam{
			Container: responses.ToolCodeInterpreterContainerUnionParam{OfString: openai.String(box.ID)}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	text := resp.OutputText()
	msg := resp.Output[len(resp.Output)-1].AsMessage()
	anns := msg.Content[0].Annotations
	if len(anns) != 2 {
		t.Fatalf("annotations of %q: %s", text, msg.RawJSON())
	}
	cited := map[string]responses.ResponseOutputTextAnnotationContainerFileCitation{}
	for _, a := range anns {
		c := a.AsContainerFileCitation()
		if c.Type != "container_file_citation" || c.ContainerID != box.ID || !strings.HasPrefix(c.FileID, "cfile_") {
			t.Fatalf("annotation %s", a.RawJSON())
		}
		cited[c.Filename] = c
	}
	rep, notes := cited["report.csv"], cited["notes.txt"]
	if runes := []rune(text); rep.StartIndex < 0 || int(rep.EndIndex) > len(runes) || string(runes[rep.StartIndex:rep.EndIndex]) != "/workspace/out/report.csv" {
		t.Fatalf("report.csv cited on [%d, %d) of %q", rep.StartIndex, rep.EndIndex, text)
	}
	if n := int64(len([]rune(text))); notes.StartIndex != n || notes.EndIndex != n {
		t.Fatalf("notes.txt (not named) cited on [%d, %d), want the end %d", notes.StartIndex, notes.EndIndex, n)
	}
	content, err := client.Containers.Files.Content.Get(t.Context(), box.ID, rep.FileID)
	if err != nil {
		t.Fatal(err)
	}
	defer content.Body.Close()
	if b, _ := io.ReadAll(content.Body); string(b) != "a,b\n1,2\n" {
		t.Fatalf("the cited file's content: %q", b)
	}
}
