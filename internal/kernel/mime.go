package kernel

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"sort"
	"strings"
)

// displayOutput picks the text representation (text/markdown > text/plain >
// text/html converted to markdown) and keeps application/json and a valid
// image/png. Everything else is listed in Omitted.
func displayOutput(data map[string]json.RawMessage, maxImage, maxText int64) Output {
	var o Output
	for _, mime := range []string{"text/markdown", "text/plain", "text/html"} {
		s, ok := mimeText(data[mime])
		if !ok {
			continue
		}
		if mime == "text/plain" && isDefaultRepr(s) {
			if _, html := data["text/html"]; html {
				continue // "<IPython.core.display.HTML object>" says nothing: use the HTML
			}
		}
		switch mime {
		case "text/html":
			o.Text = htmlToMarkdown(s, int(maxText))
		case "text/plain":
			o.Text = stripANSI(s)
		default:
			o.Text = s
		}
		o.MIME = mime
		break
	}
	if raw, ok := data["application/json"]; ok {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err == nil {
			o.JSON = buf.Bytes()
		}
	}
	if raw, ok := data["image/png"]; ok {
		img, w, h, err := decodePNG(raw, maxImage)
		if err != nil {
			o.Omitted = append(o.Omitted, "image/png ("+err.Error()+")")
		} else {
			o.PNG, o.Width, o.Height = img, w, h
		}
	}
	var rest []string
	for mime := range data {
		switch {
		case mime == o.MIME, mime == "image/png", mime == "application/json" && o.JSON != nil:
		default:
			rest = append(rest, clip(mime, 100))
		}
	}
	sort.Strings(rest)
	if len(rest) > 32 {
		rest = append(rest[:32], fmt.Sprintf("(%d more)", len(rest)-32))
	}
	o.Omitted = append(o.Omitted, rest...)
	return o
}

// isDefaultRepr reports whether s is Python's default object repr, like
// "<IPython.core.display.HTML object>" or "<foo.Bar object at 0x7f...>".
func isDefaultRepr(s string) bool {
	s = strings.TrimSpace(s)
	if len(s) < 3 || len(s) > 300 || s[0] != '<' || s[len(s)-1] != '>' || strings.ContainsAny(s[1:len(s)-1], "<>\n") {
		return false
	}
	return strings.HasSuffix(s, " object>") || strings.Contains(s, " object at 0x")
}

// mimeText decodes a text MIME value: a string or a list of strings.
func mimeText(raw json.RawMessage) (string, bool) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, true
	}
	var parts []string
	if err := json.Unmarshal(raw, &parts); err == nil {
		return strings.Join(parts, ""), true
	}
	return "", false
}

// decodePNG decodes a base64 image/png value, bounding the decoded size
// before decoding and checking that it is a PNG.
func decodePNG(raw json.RawMessage, maxImage int64) ([]byte, int, int, error) {
	s, ok := mimeText(raw)
	if !ok {
		return nil, 0, 0, fmt.Errorf("not a base64 string")
	}
	if strings.ContainsAny(s, "\r\n ") {
		s = strings.NewReplacer("\r", "", "\n", "", " ", "").Replace(s)
	}
	if n := int64(base64.StdEncoding.DecodedLen(len(s))); n > maxImage {
		return nil, 0, 0, fmt.Errorf("%s decoded; the limit is %s", humanBytes(n), humanBytes(maxImage))
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("invalid base64")
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return nil, 0, 0, fmt.Errorf("not a PNG: %v", err)
	}
	return b, cfg.Width, cfg.Height, nil
}
