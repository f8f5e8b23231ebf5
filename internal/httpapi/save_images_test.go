package httpapi_test

import (
	"bytes"
	"image/png"
	"testing"
)

// TestPythonSaveImages: with save_images, every image a cell shows is kept
// as an artifact whose content is that PNG; a key without the artifacts
// capability is refused (403 naming save_images) and nothing runs.
func TestPythonSaveImages(t *testing.T) {
	t.Parallel()
	e, _ := newFilesEnv(t, nil)
	c := e.create(e.admin, nil)
	body := map[string]any{"save_images": true, "cells": []map[string]any{
		{"code": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3]); plt.show()\nplt.plot([3, 1]); plt.show()"}}}
	r := e.do(e.admin, "POST", "/v1/computers/"+c.ID+"/python", body)
	if r.code != 200 {
		t.Fatalf("python: %s", r)
	}
	var res struct {
		Status string `json:"status"`
		Cells  []struct {
			Outputs []struct {
				PNG []byte `json:"png"`
			} `json:"outputs"`
			Artifacts []struct {
				ID       string `json:"id"`
				Filename string `json:"filename"`
				Bytes    int64  `json:"bytes"`
			} `json:"artifacts"`
		} `json:"cells"`
	}
	r.json(t, &res)
	if res.Status != "ok" || len(res.Cells) != 1 {
		t.Fatalf("result: %s", r)
	}
	var images [][]byte
	for _, o := range res.Cells[0].Outputs {
		if len(o.PNG) > 0 {
			images = append(images, o.PNG)
		}
	}
	arts := res.Cells[0].Artifacts
	if len(images) != 2 || len(arts) != 2 {
		t.Fatalf("%d images and %d artifacts, want 2 and 2: %s", len(images), len(arts), r)
	}
	for i, a := range arts {
		content := e.do(e.admin, "GET", "/v1/artifacts/"+a.ID+"/content", nil)
		if content.code != 200 || !bytes.Equal(content.body, images[i]) || a.Bytes != int64(len(images[i])) {
			t.Fatalf("artifact %s (%s): %d, %d bytes; want the cell's image %d (%d bytes)", a.ID, a.Filename, content.code, len(content.body), i, len(images[i]))
		}
		if _, err := png.DecodeConfig(bytes.NewReader(content.body)); err != nil {
			t.Fatalf("artifact %s is not a PNG: %v", a.ID, err)
		}
	}
	_, noArtifacts := e.newKey("", `{"tooling":{"system_tools":["computer"]},"computer":{}}`)
	c2 := e.create(noArtifacts, nil)
	refused := e.do(noArtifacts, "POST", "/v1/computers/"+c2.ID+"/python", body)
	if got := refused.wantError(t, 403, "forbidden"); got.Error.Param == nil || *got.Error.Param != "save_images" {
		t.Fatalf("refusal names %v, want save_images: %s", got.Error.Param, refused)
	}
}

// TestCodeInterpreterOverHTTP: a code_interpreter call through the tools
// endpoint answers the model's text and the client's OpenAI-shaped outputs.
func TestCodeInterpreterOverHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.create(e.admin, nil)
	r := e.do(e.admin, "POST", "/v1/computers/"+c.ID+"/tools/code_interpreter",
		map[string]any{"arguments": map[string]string{"code": "print(6 * 7)"}})
	var ans struct {
		Output  string `json:"output"`
		Outputs []struct {
			Type string `json:"type"`
			Logs string `json:"logs"`
		} `json:"outputs"`
	}
	r.json(t, &ans)
	if r.code != 200 || ans.Output != "42" || len(ans.Outputs) != 1 || ans.Outputs[0].Type != "logs" || ans.Outputs[0].Logs != "42" {
		t.Fatalf("code_interpreter answer: %s", r)
	}
}
