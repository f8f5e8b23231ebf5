package responses

import (
	"encoding/json"
)

// chatPart is one Chat Completions content part: text or an image.
type chatPart struct {
	Type     string        `json:"type"` // "text" or "image_url"
	Text     string        `json:"text,omitempty"`
	ImageURL *chatImageURL `json:"image_url,omitempty"`
}

type chatImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// chatMessageJSON is chatMessage's wire form, content as raw JSON.
type chatMessageJSON struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []chatToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

// MarshalJSON sends Parts as the content array when set, else Content
// (a string or null).
func (m chatMessage) MarshalJSON() ([]byte, error) {
	w := chatMessageJSON{Role: m.Role, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID}
	var err error
	if m.Parts != nil {
		w.Content, err = json.Marshal(m.Parts)
	} else {
		w.Content, err = json.Marshal(m.Content)
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads content as a string, null or an array of parts
// (stored conversations hold image parts).
func (m *chatMessage) UnmarshalJSON(data []byte) error {
	var w chatMessageJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*m = chatMessage{Role: w.Role, ToolCalls: w.ToolCalls, ToolCallID: w.ToolCallID}
	if len(w.Content) > 0 && w.Content[0] == '[' {
		return json.Unmarshal(w.Content, &m.Parts)
	}
	if len(w.Content) == 0 || string(w.Content) == "null" {
		return nil
	}
	return json.Unmarshal(w.Content, &m.Content)
}
