package tools

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/kernel"
)

// CodeInterpreterName is the normalized form of OpenAI's code_interpreter tool.
const CodeInterpreterName = "code_interpreter"

// CodeOutput is one OpenAI-shaped output of code_interpreter: logs
// ({"type":"logs","logs":"..."}) or an image ({"type":"image","url":"data:image/png;base64,..."}).
type CodeOutput struct {
	Type string `json:"type"`
	Logs string `json:"logs,omitempty"`
	URL  string `json:"url,omitempty"`
}

// CodeInterpreterTool runs code as one cell in the computer's session kernel.
func CodeInterpreterTool() Tool {
	return Tool{Name: CodeInterpreterName, Computer: true,
		Description: "Run Python code in the computer's Jupyter kernel (working directory /workspace); variables persist between calls. Returns printed output, results and errors; images are shown to the user.",
		Schema: json.RawMessage(`{"type":"object","properties":{` +
			`"code":{"type":"string","description":"The Python code to run."}},` +
			`"required":["code"],"additionalProperties":false}`),
		Run: runCodeInterpreter}
}

func runCodeInterpreter(ctx context.Context, env Env, raw json.RawMessage) (Result, error) {
	var a struct {
		Code *string `json:"code"`
	}
	if msg := DecodeArgs(raw, &a, "code"); msg != "" {
		return failed("%s", msg), nil
	}
	args, err := json.Marshal(map[string]any{"cells": []map[string]any{{"code": *a.Code, "title": nil}},
		"timeout": nil, "cwd": nil, "reset": nil})
	if err != nil {
		return Result{}, err
	}
	res, err := runPython(ctx, env, args)
	if err != nil || len(res.Cells) == 0 {
		// An argument error or an infrastructure failure: as python says it.
		return res, err
	}
	// The model's text is python's rendering without the cell header; the
	// client's logs are that without the image placeholders.
	res.Output = withoutCellHeader(res.Output)
	res.Outputs = []CodeOutput{{Type: "logs", Logs: withoutCellHeader(res.Logs)}}
	for _, o := range res.Cells[0].Outputs {
		if (o.Type == kernel.OutResult || o.Type == kernel.OutDisplay) && len(o.PNG) > 0 {
			res.Outputs = append(res.Outputs, CodeOutput{Type: "image",
				URL: "data:image/png;base64," + base64.StdEncoding.EncodeToString(o.PNG)})
		}
	}
	res.Cells = nil
	return res, nil
}

func withoutCellHeader(text string) string {
	if !strings.HasPrefix(text, "[cell 0: ") {
		return text
	}
	_, rest, _ := strings.Cut(text, "\n")
	return rest
}
